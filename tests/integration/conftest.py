"""Integration fixtures: real emulator processes, a real Redis, the gateway on a real port."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from gateway.app import create_app
from gateway.settings import Settings
from workers.supervision.launch import FarmLayout, WorkerHandle, WorkerSpec, emulator_argv
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

TRANSCRIPT = Path(__file__).parents[1] / "contract" / "ws_transcript.json"
CHECKPOINTS = ("sd15_a.safetensors", "sd15_b.safetensors", "sdxl_c.safetensors")
TIME_SCALE = 0.01
GATEWAY_START_S = 30.0
GATEWAY_STOP_S = 30.0


def start_emulators(layout: FarmLayout, names: list[str], **spec: Any) -> list[WorkerHandle]:
    """Emulator processes (the gateway does not own them: it reaches them by URL)."""
    layout.input_dir.mkdir(parents=True, exist_ok=True)
    handles = []
    for name in names:
        for folder in (layout.output_dir(name), layout.temp_parent(name)):
            folder.mkdir(parents=True, exist_ok=True)
        worker = WorkerSpec(name=name, emulate="rtx4070ti", checkpoints=CHECKPOINTS, **spec)
        port = free_port()
        process = ChildProcess(
            emulator_argv(worker, port, layout),
            env=dict(os.environ),
            log_path=layout.root / name / "worker.log",
        )
        process.start()
        handles.append(WorkerHandle(spec=worker, url=f"http://127.0.0.1:{port}", process=process))
    try:
        for handle in handles:
            assert handle.process is not None
            handle.process.wait_ready(handle.url + "/prompt", 60)
            handle.ready = True
    except BaseException:
        stop_emulators(handles)
        raise
    return handles


def stop_emulators(handles: list[WorkerHandle]) -> None:
    for handle in handles:
        if handle.process is not None:
            handle.process.terminate(2)


@contextmanager
def started_emulators(
    layout: FarmLayout, names: list[str], **spec: Any
) -> Iterator[list[WorkerHandle]]:
    """`start_emulators`, stopped again when the block ends (however it ends)."""
    handles = start_emulators(layout, names, **spec)
    try:
        yield handles
    finally:
        stop_emulators(handles)


def as_external(handles: list[WorkerHandle]) -> list[WorkerHandle]:
    """The same processes, seen as workers the gateway reaches but does not own."""
    return [WorkerHandle(spec=h.spec, url=h.url, ready=True) for h in handles]


@pytest.fixture(scope="session")
def farm_layout(tmp_path_factory: pytest.TempPathFactory) -> FarmLayout:
    root = tmp_path_factory.mktemp("farm")
    return FarmLayout(root / "workers", root / "input", TIME_SCALE)


@pytest.fixture(scope="session")
def emulators(farm_layout: FarmLayout) -> Iterator[list[WorkerHandle]]:
    """Four emulated workers shared by the tests that do not break them."""
    handles = start_emulators(farm_layout, ["sim0", "sim1", "sim2", "sim3"])
    yield handles
    stop_emulators(handles)


def gateway_settings(redis_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "data_dir": tmp_path / "data",
        "lease_s": 2.0,
        "stall_timeout_s": 30.0,
        "policy": "sticky",
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def running_gateway(
    settings: Settings, handles: list[WorkerHandle], input_dir: Path | None
) -> AsyncIterator[str]:
    """The gateway app served by uvicorn on a free port, inside this event loop."""
    async with served_gateway(settings, handles, input_dir) as (url, _):
        yield url


@asynccontextmanager
async def served_gateway(
    settings: Settings, handles: list[WorkerHandle], input_dir: Path | None
) -> AsyncIterator[tuple[str, FastAPI]]:
    """`running_gateway`, with the app too (its `state.context` once started)."""
    app = create_app(settings, handles, input_dir=input_dir, node="test")
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=int(GATEWAY_STOP_S / 2),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="gateway")
    await _until_started(server, task)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await _until_stopped(task)


async def _until_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    deadline_s = asyncio.get_running_loop().time() + GATEWAY_START_S
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("gateway did not start")
        if asyncio.get_running_loop().time() > deadline_s:
            task.cancel()
            pytest.fail(f"the gateway did not start within {GATEWAY_START_S}s")
        await asyncio.sleep(0.02)


async def _until_stopped(task: asyncio.Task[None]) -> None:
    """A gateway that does not stop fails the test with the stacks of what still runs."""
    done, _ = await asyncio.wait({task}, timeout=GATEWAY_STOP_S)
    if not done:
        pytest.fail(
            f"the gateway did not stop within {GATEWAY_STOP_S}s; still running:\n{task_stacks()}"
        )
    task.result()


def task_stacks() -> str:
    """Where every other task of this event loop waits."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.print_stack(limit=12, file=out)
    return out.getvalue()


def txt2img(
    ckpt: str, prefix: str, *, seed: int = 1, steps: int = 1, size: int = 64
) -> dict[str, Any]:
    """The recorded transcript's graph on another checkpoint."""
    data = json.loads(TRANSCRIPT.read_text())
    prompt: dict[str, Any] = copy.deepcopy(data["responses"]["queue_during"]["queue_running"][0][2])
    prompt["4"]["inputs"]["ckpt_name"] = ckpt
    prompt["5"]["inputs"].update(width=size, height=size)
    prompt["3"]["inputs"].update(seed=seed, steps=steps)
    prompt["9"]["inputs"]["filename_prefix"] = prefix
    return prompt
