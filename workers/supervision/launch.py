"""What to launch for each worker: its spec, its folders, its command line and environment.

A `WorkerSpec` (a real ComfyUI on one GPU slot, or an emulated one) becomes a command line with
its own port, output and temp directories and the farm's shared input directory, and an
environment with its GPU slot in CUDA_VISIBLE_DEVICES. `WorkerHandle` is how the gateway
reaches a worker, whether it started it or not.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workers.supervision.process import ChildProcess


@dataclass(frozen=True)
class WorkerSpec:
    """What to run for one worker. `url` set: an instance someone else runs (never started)."""

    name: str
    group: str = "default"
    gpu: int | str | None = None
    """Its GPU slot: an index, or a CUDA_VISIBLE_DEVICES list such as "0,1"."""
    args: tuple[str, ...] = ()
    python: str | None = None
    comfyui: Path | None = None
    emulate: str | None = None
    checkpoints: tuple[str, ...] = ()
    models: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """An emulated worker's files of other model folders, as (folder, files) pairs."""
    url: str | None = None
    port: int | None = None
    """None: a free port, chosen at start."""
    preload: tuple[str, ...] = ()
    """Checkpoints warmed up, in order, before the worker takes client jobs."""

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """The GPUs of its slot, as indices (empty when none or when given as UUIDs)."""
        # GPU 0 is falsy: test for None, or the first card's slot would name no GPU.
        slot = "" if self.gpu is None else str(self.gpu)
        parts = [part.strip() for part in slot.split(",") if part.strip()]
        return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


@dataclass(frozen=True)
class FarmLayout:
    """Where workers keep files: one folder per worker under `root`, one shared input folder."""

    root: Path
    input_dir: Path
    time_scale: float = 1.0

    def output_dir(self, name: str) -> Path:
        return self.root / name / "output"

    @property
    def page_cache_dir(self) -> Path:
        """What the emulators this node starts share as their host's page cache."""
        return self.root / "_page_cache"

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
    stopping: bool = False
    """Its supervisor ends this run on purpose (and reports the exit itself)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        """The pid of the running process (None when it is not running)."""
        return self.process.pid if self.process and self.process.running else None

    @property
    def managed(self) -> bool:
        return self.process is not None

    def alive(self) -> bool:
        """False only when a process we started has exited unasked (a crash); external
        workers count as alive, and so does a run its supervisor is ending on purpose."""
        return self.process is None or self.process.running or self.stopping


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
        "--page-cache",
        str(layout.page_cache_dir),
    ]
    if spec.checkpoints:
        argv += ["--checkpoints", ",".join(spec.checkpoints)]
    for folder, files in spec.models:
        argv += ["--models", f"{folder}={','.join(files)}"]
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
        # So that an index means the same card to CUDA as to NVML (telemetry).
        env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return env
