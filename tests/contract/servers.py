"""The server under test: the project's emulator as a child process, a running ComfyUI, or
`comfy-gateway serve` in front of emulated or real ComfyUI workers.

The same checks run against all of them. A server also says how to build a prompt that runs
long enough to be interrupted or to hold the queue: a real CPU ComfyUI needs many sampler steps
on a small image, the emulator's time depends on its cost model and time scale.

Through a gateway a few answers differ by design; `Server` carries what the checks need to
state those differences explicitly (`gateway`, `local_file`, `operator_headers`).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gateway.serve import serve_argv
from tests.contract import graphs
from workers.supervision.launch import FarmLayout, WorkerSpec, emulator_argv
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

READY_TIMEOUT_S = 60.0
# Real ComfyUI workers on a few CPU cores: each takes 15-30 s to answer, longer when they
# start together.
REAL_WORKERS_READY_TIMEOUT_S = 240.0
# Most checks: emulated time runs 100x faster than on a card.
FAST_TIME_SCALE = 0.01
# Checks that interrupt a running prompt or hold the queue with one need it to last.
SLOW_TIME_SCALE = 1.0
# The card profile of the gateway's emulated workers.
WORKER_PROFILE = "rtx4070ti"


@dataclass(frozen=True)
class LongJob:
    """The shape of a txt2img prompt that runs for many seconds on this server."""

    steps: int
    size: int


NO_TOKEN = {"Authorization": ""}
"""Headers that override a client's token: a request as one without it makes."""


@dataclass(frozen=True)
class Server:
    """Where the server under test listens, and what it is.

    `workers` names the workers behind a gateway (empty for one ComfyUI); `auth_token` is the
    gateway's operator token, which its clear-all routes require.
    """

    url: str
    long_job: LongJob
    workers: tuple[str, ...] = ()
    auth_token: str | None = None

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"

    @property
    def gateway(self) -> bool:
        return bool(self.workers)

    @property
    def operator_headers(self) -> dict[str, str]:
        """What a client sends to a gateway: its bearer token, which every route but the probes
        requires (and the clear-all routes from a bearer header only)."""
        return {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}

    def long_prompt(self, ckpt_name: str, prefix: str, *, seed: int) -> graphs.Prompt:
        """A txt2img prompt that keeps this server's worker busy until interrupted."""
        job = self.long_job
        return graphs.txt2img(ckpt_name, prefix, seed=seed, steps=job.steps, size=job.size)

    def local_file(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """An output or temp file entry as one ComfyUI reports it.

        A gateway reports such files with the name of the worker that wrote them as the first
        part of `subfolder` (gateway/jobs/history.py); that part must be there, and is taken off.
        """
        entry = dict(item)
        if not self.gateway or entry.get("type") == "input":
            return entry
        head, _, rest = str(entry["subfolder"]).partition("/")
        assert head in self.workers, f"subfolder {entry['subfolder']!r} names no worker"
        return {**entry, "subfolder": rest}

    def local_files(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.local_file(item) for item in items]


@dataclass(frozen=True)
class ComfyCheckout:
    """A ComfyUI checkout and the Python that runs it (real workers behind a gateway), on the
    CPU, or all on one GPU (`gpu`, an index as CUDA numbers them)."""

    path: Path
    python: str
    gpu: int | None = None


# Real ComfyUI on a CPU: ~0.03 s per step at 64x64 with the tiny checkpoint, checked for an
# interrupt at every step.
REAL_LONG_JOB = LongJob(steps=10000, size=64)
# The emulator at time scale 1: an SD1.5-sized image, every step costs what it would on a card.
EMULATOR_LONG_JOB = LongJob(steps=10000, size=512)


def real_server(url: str) -> Server:
    return Server(url=url.rstrip("/"), long_job=REAL_LONG_JOB)


@contextmanager
def emulator(work_dir: Path, *, time_scale: float) -> Iterator[Server]:
    """Start `python -m workers.emulator` on a free port with its own input, output and temp
    directories and no simulated start-up delay; stop it on exit."""
    port = free_port()
    layout = FarmLayout(work_dir, work_dir / "input", time_scale)
    spec = WorkerSpec("emulator", emulate="h200", args=("--startup-s", "0"))
    layout.output_dir(spec.name).mkdir(parents=True)
    layout.input_dir.mkdir(parents=True)
    argv = emulator_argv(spec, port, layout)
    child = ChildProcess(argv, log_path=work_dir / "emulator.log")
    url = f"http://127.0.0.1:{port}"
    child.start()
    try:
        child.wait_ready(f"{url}/prompt", READY_TIMEOUT_S)
        yield Server(url=url, long_job=EMULATOR_LONG_JOB)
    finally:
        child.terminate()


def farm_toml(names: list[str], token: str, *, emulated: bool, gpu: int | None = None) -> str:
    """The gateway's config file: its operator token and one [[workers]] entry per name,
    emulated cards, or real ComfyUI (the checkout comes from `--comfyui`) on the CPU (`--cpu`,
    no GPU slot) or all on GPU `gpu` (several instances sharing one card)."""
    lines = [f"auth_token = {json.dumps(token)}"]
    for name in names:
        lines += ["", "[[workers]]", f"name = {json.dumps(name)}"]
        if emulated:
            lines.append(f"emulate = {json.dumps(WORKER_PROFILE)}")
            lines.append('args = ["--startup-s", "0"]')  # no simulated start-up delay
        elif gpu is None:
            lines.append('args = ["--cpu"]')
        else:
            lines.append(f"gpu = {gpu}")
    return "\n".join(lines) + "\n"


@contextmanager
def gateway(
    work_dir: Path, *, workers: int, time_scale: float, comfyui: ComfyCheckout | None = None
) -> Iterator[Server]:
    """Start `python -m gateway serve` on a free port with its own data directory (and so its
    own embedded Redis) in front of `workers` workers; stop it, and them, on exit."""
    kind = "sim" if comfyui is None else "cpu" if comfyui.gpu is None else f"gpu{comfyui.gpu}w"
    names = [f"{kind}{index}" for index in range(workers)]
    token = secrets.token_urlsafe(16)
    config = work_dir / "farm.toml"
    gpu = None if comfyui is None else comfyui.gpu
    config.write_text(farm_toml(names, token, emulated=comfyui is None, gpu=gpu))
    port = free_port()
    argv = serve_argv(port, work_dir / "data", "--time-scale", str(time_scale), config=config)
    if comfyui is not None:
        argv += ["--comfyui", str(comfyui.path), "--comfyui-python", comfyui.python]
    env = dict(os.environ) if gpu is not None else {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    child = ChildProcess(argv, env=env, log_path=work_dir / "gateway.log")
    url = f"http://127.0.0.1:{port}"
    timeout_s = READY_TIMEOUT_S if comfyui is None else REAL_WORKERS_READY_TIMEOUT_S
    child.start()
    try:
        wait_for_workers(child, url, len(names), timeout_s, token)
        long_job = EMULATOR_LONG_JOB if comfyui is None else REAL_LONG_JOB
        yield Server(url=url, long_job=long_job, workers=tuple(names), auth_token=token)
    finally:
        child.terminate(30.0)


def wait_for_workers(
    child: ChildProcess, url: str, count: int, timeout_s: float, token: str
) -> None:
    """Return once the gateway reports `count` ready workers; fail if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.running:
            raise RuntimeError(f"the gateway exited with {child.returncode}; see its log")
        if _ready_workers(url, token) >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the gateway at {url} had not {count} ready workers after {timeout_s}s")


def _ready_workers(url: str, token: str) -> int:
    auth = {"Authorization": f"Bearer {token}"}
    try:
        response = httpx.get(f"{url}/gateway/workers", timeout=2.0, headers=auth)
    except httpx.TransportError:
        return 0
    if response.status_code != 200:
        return 0
    return sum(1 for worker in response.json()["workers"] if worker["state"] == "ready")
