"""One child process (a ComfyUI or an emulator): start, wait until ready, terminate then kill.

Children run in their own process group and get SIGKILL when the parent dies (Linux
`PR_SET_PDEATHSIG`), so no ComfyUI outlives the gateway, whatever way the gateway exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

import httpx

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


class ProcessStartError(RuntimeError):
    """The child exited or did not answer its readiness probe in time."""


class OutputSink(Protocol):
    """Takes a child's stdout+stderr pipe and drains it (e.g. `workers.logs.LogCapture`)."""

    def attach(self, stream: IO[bytes]) -> None: ...


def die_with_parent() -> None:
    """Runs in the child between fork and exec: its own process group (a terminal's Ctrl-C
    or a group signal reaches the parent only, which then stops its children in order),
    and SIGKILL when the parent thread that spawned it dies."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class ChildProcess:
    """A small wrapper around one child: the same verbs for ComfyUI and for the emulator."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
        output: OutputSink | None = None,
    ):
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.log_path = log_path
        self.output = output
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Spawn the child. Call it from the thread that lives as long as the child should:
        the kernel's parent-death signal follows the spawning thread, not the process."""
        out = subprocess.DEVNULL
        if self.output is not None:
            out = subprocess.PIPE
        elif self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self.log_path.open("ab")  # type: ignore[assignment]
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # prctl must run in the child itself; the hook calls only setpgrp and prctl.
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        if self.output is not None and self._proc.stdout is not None:
            self.output.attach(self._proc.stdout)
        elif out is not subprocess.DEVNULL:
            out.close()  # type: ignore[attr-defined]
        log.info("started pid=%s argv=%s", self._proc.pid, " ".join(self.argv[:4]))

    def wait_ready(self, url: str, timeout_s: float, interval_s: float = 0.05) -> float:
        """Poll `url` until it answers 200; returns the seconds it took."""
        started = time.monotonic()
        deadline = started + timeout_s
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if not self.running:
                    raise ProcessStartError(f"exited with {self.returncode} before ready")
                try:
                    if client.get(url).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                time.sleep(interval_s)
        raise ProcessStartError(f"not ready at {url} after {timeout_s}s")

    def terminate(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM the process group, SIGKILL after `grace_s`; returns the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            # A stopped process (SIGSTOP, a debugger) acts on SIGTERM only once continued.
            self._signal_group(signal.SIGCONT)
            try:
                self._proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._proc.wait()
        return self._proc.returncode

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            self._proc.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)
