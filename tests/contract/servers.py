"""The server under test: the project's emulator as a child process, or a running ComfyUI.

The same checks run against both. A server also says how to build a prompt that runs long
enough to be interrupted or to hold the queue: a real CPU ComfyUI needs many sampler steps on
a small image, the emulator's time depends on its cost model and time scale.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.contract import graphs
from workers.ports import free_port
from workers.process import ChildProcess

READY_TIMEOUT_S = 60.0
# Most checks: emulated time runs 100x faster than on a card.
FAST_TIME_SCALE = 0.01
# Checks that interrupt a running prompt or hold the queue with one need it to last.
SLOW_TIME_SCALE = 1.0


@dataclass(frozen=True)
class LongJob:
    """The shape of a txt2img prompt that runs for many seconds on this server."""

    steps: int
    size: int


@dataclass(frozen=True)
class Server:
    """Where the server under test listens, and what it is."""

    url: str
    long_job: LongJob

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"

    def long_prompt(self, ckpt_name: str, prefix: str, *, seed: int) -> graphs.Prompt:
        """A txt2img prompt that keeps this server's worker busy until interrupted."""
        job = self.long_job
        return graphs.txt2img(ckpt_name, prefix, seed=seed, steps=job.steps, size=job.size)


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
    output_dir, input_dir = work_dir / "output", work_dir / "input"
    output_dir.mkdir(parents=True)
    input_dir.mkdir(parents=True)
    argv = [
        sys.executable,
        "-m",
        "workers.emulator",
        "--port",
        str(port),
        "--time-scale",
        str(time_scale),
        "--output-directory",
        str(output_dir),
        "--input-directory",
        str(input_dir),
        "--temp-directory",
        str(work_dir),
        "--startup-s",
        "0",
    ]
    child = ChildProcess(argv, log_path=work_dir / "emulator.log")
    url = f"http://127.0.0.1:{port}"
    child.start()
    try:
        child.wait_ready(f"{url}/prompt", READY_TIMEOUT_S)
        yield Server(url=url, long_job=EMULATOR_LONG_JOB)
    finally:
        child.terminate()
