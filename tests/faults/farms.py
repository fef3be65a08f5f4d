"""A supervised farm for fault tests: the gateway with the supervisor that `serve` builds, either
in this event loop (`supervised_gateway`) or as a real `comfy-gateway serve` process
(`gateway_process`), over emulated workers on small time scales."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from gateway.app import create_app
from gateway.dispatch.dispatcher import Dispatcher
from gateway.serve import make_supervisor, serve_argv
from gateway.settings import Settings, WorkerConfig, resolve_workers
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS
from workers.readiness import NotReady, answers_200, wait_until
from workers.supervision.launch import FarmLayout
from workers.supervision.ports import free_port
from workers.supervision.process import alive
from workers.supervision.supervisor import Supervisor
from workers.telemetry import Telemetry

TOKEN = "operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FAST: dict[str, Any] = {
    "time_scale": 0.01,
    "lease_s": 2.0,
    "stall_timeout_s": 30.0,
    "interrupt_grace_s": 0.3,
    "worker_start_timeout_s": 20.0,
    "warmup_timeout_s": 10.0,
    "drain_grace_s": 10.0,
    "stop_grace_s": 2.0,
    "supervise_interval_s": 0.05,
    "policy": "round_robin",
    "auth_token": TOKEN,
    "restart": {
        "backoff_initial_s": 0.05,
        "backoff_max_s": 0.2,
        "stable_after_s": 60.0,
        "max_start_failures": 2,
        "flap_exits": 3,
        "flap_window_s": 60.0,
    },
}


def emulated(name: str, **fields: Any) -> WorkerConfig:
    return WorkerConfig(name=name, emulate="rtx4070ti", checkpoints=CHECKPOINTS, **fields)


def farm_settings(
    redis_url: str, data_dir: Path, workers: list[WorkerConfig], **over: Any
) -> Settings:
    values = {**FAST, "redis_url": redis_url, "data_dir": data_dir, "workers": workers, **over}
    return Settings(**values)


@dataclass
class Farm:
    """A farm under test; `http` sends the operator token (`AUTH`) on every request."""

    url: str
    supervisor: Supervisor
    http: httpx.AsyncClient
    dispatcher: Dispatcher | None = None
    """The in-process gateway's dispatcher (`supervised_gateway`), whose rounds tests wait on."""

    async def worker(self, name: str) -> dict[str, Any]:
        answer = await self.http.get(f"/gateway/workers/{name}")
        assert answer.status_code == 200, answer.text
        record: dict[str, Any] = answer.json()
        return record

    async def until_worker(
        self, name: str, timeout_s: float = 20.0, **expected: Any
    ) -> dict[str, Any]:
        """Poll the worker's record until every `expected` field has its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            record = await self.worker(name)
            if all(record.get(key) == value for key, value in expected.items()):
                return record
            assert time.monotonic() < deadline, f"{name} never had {expected}: {record}"
            await asyncio.sleep(0.05)

    async def job(self, job_id: str) -> dict[str, Any]:
        record: dict[str, Any] = (await self.http.get(f"/gateway/jobs/{job_id}")).json()
        return record

    async def until_job(self, job_id: str, state: str, timeout_s: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while (record := await self.job(job_id))["state"] != state:
            assert time.monotonic() < deadline, f"job {job_id} never {state}: {record}"
            await asyncio.sleep(0.05)
        return record


@asynccontextmanager
async def farm_client(farm: Farm) -> AsyncIterator[ComfyStyleClient]:
    """A ComfyUI-style client of `farm`, with the operator token, its `/ws` open."""
    client = ComfyStyleClient(farm.url, token=TOKEN)
    await client.open()
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def supervised_gateway(settings: Settings) -> AsyncIterator[Farm]:
    """`comfy-gateway serve`'s farm in this event loop; children stopped on exit."""
    layout = FarmLayout(
        settings.data_dir / "workers", settings.data_dir / "input", settings.time_scale
    )
    telemetry = Telemetry(interval_s=settings.telemetry_interval_s)
    workers = resolve_workers(settings, ())
    supervisor = make_supervisor(settings, workers, layout, telemetry, os.environ)
    try:
        handles = await supervisor.start_all()
        app = create_app(
            settings, handles, input_dir=layout.input_dir, node="test",
            supervisor=supervisor, telemetry=telemetry,
        )  # fmt: skip
        async with (
            _served(app) as url,
            httpx.AsyncClient(base_url=url, timeout=10, headers=AUTH) as http,
        ):
            yield Farm(url, supervisor, http, app.state.context.farm.dispatcher)
    finally:
        await supervisor.stop_all()


@asynccontextmanager
async def _served(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway did not start")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def write_config(path: Path, names: list[str], **extra: object) -> Path:
    """A config file for `comfy-gateway serve`: `FAST` with `extra`, emulated workers `names`."""
    given = {**FAST, **extra}
    lines = [f"{k} = {v!r}" for k, v in given.items() if not isinstance(v, dict) and v is not None]
    lines += ["[restart]", *(f"{k} = {v!r}" for k, v in FAST["restart"].items())]
    checkpoints = ", ".join(f'"{c}"' for c in CHECKPOINTS)
    for name in names:
        lines += ["[[workers]]", f'name = "{name}"', 'emulate = "rtx4070ti"']
        lines += [f"checkpoints = [{checkpoints}]"]
    path.write_text("\n".join(lines).replace("'", '"') + "\n")
    return path


@dataclass
class GatewayProcess:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    data_dir: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def gateway_process(
    config: Path, redis_url: str, data_dir: Path, *, ready_timeout_s: float = 30
) -> Iterator[GatewayProcess]:
    """`python -m gateway serve --config ...` as a real process, ready to serve."""
    port = free_port()
    log_path = data_dir / "gateway.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = serve_argv(port, data_dir, "--redis-url", redis_url, config=config)
    with log_path.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    gateway = GatewayProcess(f"http://127.0.0.1:{port}", process, log_path, data_dir)
    try:
        _wait_ready(gateway, timeout_s=ready_timeout_s)
        yield gateway
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait()


def _wait_ready(gateway: GatewayProcess, timeout_s: float) -> None:
    def gone() -> str | None:
        code = gateway.process.poll()
        return None if code is None else f"gateway exited with {code}"

    with httpx.Client(timeout=1) as http:
        try:
            wait_until(answers_200(http, gateway.url + "/readyz"), timeout_s, gone=gone)
        except NotReady as e:
            raise AssertionError(f"{e.reason}:\n{gateway.log()}") from e


def wait_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    """The pids still alive after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
