"""Start the farm's worker processes and wait until they answer.

A `WorkerSpec` (a real ComfyUI on one GPU slot, or an emulated one) becomes a `ChildProcess`
with its own port, output and temp directories and the farm's shared input directory. This is
the minimal start / wait-ready / stop; restart policy and draining build on the same handles.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workers.ports import free_port
from workers.process import ChildProcess, ProcessStartError

log = logging.getLogger(__name__)

READY_PATH = "/prompt"


@dataclass(frozen=True)
class WorkerSpec:
    """What to run for one worker. `url` set: an instance someone else runs (never started)."""

    name: str
    group: str = "default"
    gpu: int | None = None
    args: tuple[str, ...] = ()
    python: str | None = None
    comfyui: Path | None = None
    emulate: str | None = None
    checkpoints: tuple[str, ...] = ()
    url: str | None = None


@dataclass(frozen=True)
class FarmLayout:
    """Where workers keep files: one folder per worker under `root`, one shared input folder."""

    root: Path
    input_dir: Path
    time_scale: float = 1.0

    def output_dir(self, name: str) -> Path:
        return self.root / name / "output"

    def temp_parent(self, name: str) -> Path:
        # ComfyUI uses DIR/temp and deletes it at every start: never shared between workers.
        return self.root / name / "tmp"

    @property
    def frontend_dir(self) -> Path:
        return self.root / "_empty_frontend"


@dataclass
class WorkerHandle:
    """One worker as the gateway reaches it."""

    spec: WorkerSpec
    url: str
    process: ChildProcess | None = None
    ready: bool = False
    error: str | None = None
    started_s: float | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def managed(self) -> bool:
        return self.process is not None

    def alive(self) -> bool:
        """False only when a process we started has exited; external workers count as alive."""
        return self.process is None or self.process.running


def emulator_argv(spec: WorkerSpec, port: int, layout: FarmLayout) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "workers.emulator",
        "--port",
        str(port),
        "--profile",
        spec.emulate or "default",
        "--time-scale",
        str(layout.time_scale),
    ]
    if spec.checkpoints:
        argv += ["--checkpoints", ",".join(spec.checkpoints)]
    argv += _dir_args(spec, layout)
    return [*argv, *spec.args]


def comfyui_argv(spec: WorkerSpec, port: int, layout: FarmLayout) -> list[str]:
    python = spec.python or sys.executable
    argv = [
        python,
        "main.py",
        "--listen",
        "127.0.0.1",
        "--port",
        str(port),
        "--front-end-root",
        str(layout.frontend_dir),
        "--disable-auto-launch",
        "--database-url",
        "sqlite:///:memory:",
    ]
    return [*argv, *_dir_args(spec, layout), *spec.args]


def _dir_args(spec: WorkerSpec, layout: FarmLayout) -> list[str]:
    return [
        "--output-directory",
        str(layout.output_dir(spec.name)),
        "--input-directory",
        str(layout.input_dir),
        "--temp-directory",
        str(layout.temp_parent(spec.name)),
    ]


def worker_env(spec: WorkerSpec, environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    if spec.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(spec.gpu)
    return env


def visible_gpus(
    environ: Mapping[str, str], count: Callable[[], int] | None = None
) -> tuple[int, ...]:
    """GPU slots to use: CUDA_VISIBLE_DEVICES when set, else every device pynvml counts."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        parts = [part.strip() for part in listed.split(",") if part.strip()]
        if all(part.isdigit() for part in parts):
            return tuple(int(part) for part in parts)
        return tuple(range(len(parts)))
    return tuple(range((count or _nvml_count)()))


def _nvml_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: no GPUs
        return 0


Spawn = Callable[..., ChildProcess]


class Supervisor:
    """Starts every worker of a farm, waits until they are ready, stops them all."""

    def __init__(
        self,
        specs: Sequence[WorkerSpec],
        layout: FarmLayout,
        *,
        environ: Mapping[str, str],
        spawn: Spawn = ChildProcess,
        port_for: Callable[[], int] = free_port,
    ):
        self.specs = list(specs)
        self.layout = layout
        self.environ = dict(environ)
        self.spawn = spawn
        self.port_for = port_for
        self.handles: list[WorkerHandle] = []

    async def start_all(self, timeout_s: float) -> list[WorkerHandle]:
        """Start every worker and wait for all; a worker that fails is reported, not fatal."""
        self._make_dirs()
        self.handles = [self._start(spec) for spec in self.specs]
        await asyncio.gather(*(self._wait(handle, timeout_s) for handle in self.handles))
        return self.handles

    async def restart(self, handle: WorkerHandle, timeout_s: float) -> WorkerHandle:
        """Stop one managed worker and start it again on the same port."""
        if handle.process is None:
            return handle
        await asyncio.to_thread(handle.process.terminate)
        handle.process.start()
        handle.ready = False
        await self._wait(handle, timeout_s)
        return handle

    async def stop_all(self, grace_s: float = 5.0) -> None:
        managed = [handle.process for handle in self.handles if handle.process is not None]
        await asyncio.gather(*(asyncio.to_thread(proc.terminate, grace_s) for proc in managed))

    def _make_dirs(self) -> None:
        self.layout.input_dir.mkdir(parents=True, exist_ok=True)
        self.layout.frontend_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            self.layout.output_dir(spec.name).mkdir(parents=True, exist_ok=True)
            self.layout.temp_parent(spec.name).mkdir(parents=True, exist_ok=True)

    def _start(self, spec: WorkerSpec) -> WorkerHandle:
        if spec.url is not None:
            return WorkerHandle(spec=spec, url=spec.url.rstrip("/"))
        port = self.port_for()
        if spec.emulate is not None:
            argv, cwd = emulator_argv(spec, port, self.layout), None
        else:
            argv, cwd = comfyui_argv(spec, port, self.layout), spec.comfyui
        process = self.spawn(
            argv,
            env=worker_env(spec, self.environ),
            cwd=cwd,
            log_path=self.layout.root / spec.name / "worker.log",
        )
        process.start()
        return WorkerHandle(spec=spec, url=f"http://127.0.0.1:{port}", process=process)

    async def _wait(self, handle: WorkerHandle, timeout_s: float) -> None:
        try:
            if handle.process is not None:
                url = handle.url + READY_PATH
                took_s = await asyncio.to_thread(handle.process.wait_ready, url, timeout_s)
                log.info("worker %s ready in %.2fs at %s", handle.name, took_s, handle.url)
            handle.ready = True
        except ProcessStartError as exc:
            handle.error = str(exc)
            log.error("worker %s failed to start: %s", handle.name, exc)
