"""One child process (a ComfyUI or an emulator): start, wait until ready, terminate then kill.

Children run in their own process group and get SIGKILL when the parent dies (Linux
`PR_SET_PDEATHSIG`), so no child outlives the gateway, whatever way the gateway exits. Workers
are the exception: a `KeptProcess` runs under a keeper (`workers.supervision.keeper`) that outlives
a gateway
crash for a grace period, so that the next gateway adopts the worker and its running job.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import httpx

from workers.readiness import NotReady, Pacing, answers_200, wait_until

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


class ProcessStartError(RuntimeError):
    """The child exited or did not answer its readiness probe in time."""


class OutputSink(Protocol):
    """Takes a child's stdout+stderr pipe and drains it (e.g.
    `workers.supervision.logs.LogCapture`)."""

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
        self.preexec = die_with_parent

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
            self.command(),
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # prctl must run in the child itself; the hook calls only setpgrp and prctl.
            preexec_fn=self.preexec,  # noqa: PLW1509
        )
        if self.output is not None and self._proc.stdout is not None:
            self.output.attach(self._proc.stdout)
        elif out is not subprocess.DEVNULL:
            out.close()  # type: ignore[attr-defined]
        log.info("started pid=%s argv=%s", self._proc.pid, " ".join(self.argv[:4]))

    def command(self) -> list[str]:
        """What is executed (`argv`, unless a subclass wraps it)."""
        return self.argv

    def wait_ready(self, url: str, timeout_s: float, interval_s: float = 0.05) -> float:
        """Poll `url` until it answers 200; returns the seconds it took."""
        with httpx.Client(timeout=1.0) as client:
            try:
                return wait_until(
                    answers_200(client, url),
                    timeout_s,
                    gone=self._exit_reason,
                    pacing=Pacing(interval_s, 1.0, interval_s),
                )
            except NotReady as e:
                reason = e.reason if e.exited else f"not ready at {url} after {timeout_s}s"
                raise ProcessStartError(reason) from e

    def _exit_reason(self) -> str | None:
        return None if self.running else f"exited with {self.returncode} before ready"

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


@dataclass(frozen=True)
class Keeping:
    """Where a kept worker's keeper finds its lease and log, and how long it waits."""

    lease: Path
    """Touched by the gateway while it runs (`touch_lease`)."""
    record: Path
    """The keeper's pid and the worker's command line, for the next gateway to adopt."""
    log: Path
    grace_s: float
    log_max_bytes: int = 10 << 20
    log_backups: int = 3


def touch_lease(lease: Path) -> None:
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.touch()


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def first_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(children[0]) if children else None


def recorded_port(record: Path) -> int | None:
    """The port of the worker a keeper still runs (from its record), if any."""
    try:
        port = json.loads(record.read_text()).get("port")
    except (OSError, ValueError, AttributeError):
        return None
    return port if isinstance(port, int) else None


class KeptProcess(ChildProcess):
    """A worker started under a keeper, or adopted from the gateway that started it.

    `argv` is the worker's own command line and `pid` the worker's pid (the keeper's child);
    signals go to the keeper's process group, which holds both.
    """

    def __init__(
        self,
        argv: Sequence[str],
        keeping: Keeping,
        *,
        port: int,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ):
        super().__init__(argv, env=env)
        self.keeping = keeping
        self.port = port
        self.worker_cwd = cwd
        self.preexec = os.setpgrp  # not die_with_parent: the keeper outlives the gateway
        self._adopted: int | None = None
        self._worker_pid: int | None = None

    def command(self) -> list[str]:
        k = self.keeping
        head = [sys.executable, "-m", "workers.supervision.keeper", "--lease", str(k.lease)]
        head += ["--grace-s", str(k.grace_s), "--log", str(k.log)]
        head += ["--log-max-bytes", str(k.log_max_bytes), "--log-backups", str(k.log_backups)]
        if self.worker_cwd is not None:
            head += ["--cwd", str(self.worker_cwd)]
        return [*head, "--", *self.argv]

    @property
    def keeper_pid(self) -> int | None:
        return self._adopted if self._adopted is not None else super().pid

    @property
    def pid(self) -> int | None:
        keeper = self.keeper_pid
        if keeper is None:
            return None
        if self._worker_pid is None or not alive(self._worker_pid):
            self._worker_pid = first_child(keeper)
        return self._worker_pid

    @property
    def adopted(self) -> bool:
        return self._adopted is not None

    @property
    def returncode(self) -> int | None:
        return None if self._adopted is not None else super().returncode

    @property
    def running(self) -> bool:
        return alive(self._adopted) if self._adopted is not None else super().running

    def start(self) -> None:
        self._adopted = self._worker_pid = None
        super().start()
        record = {"pid": self.keeper_pid, "port": self.port, "argv": self.argv}
        self.keeping.record.parent.mkdir(parents=True, exist_ok=True)
        self.keeping.record.write_text(json.dumps(record))

    def adopt(self) -> bool:
        """Take over the keeper a previous gateway left running this same command line.
        A keeper left with another command line (the config changed) is stopped."""
        try:
            record = json.loads(self.keeping.record.read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if not (alive(pid) and _is_keeper(pid, self.keeping.lease)):
            return False
        if record.get("argv") != self.argv or record.get("port") != self.port:
            _signal_group(pid, signal.SIGKILL)
            return False
        self._adopted = pid
        log.info("adopted pid=%s (keeper %s) argv=%s", self.pid, pid, " ".join(self.argv[:4]))
        return True

    def terminate(self, grace_s: float = 5.0) -> int | None:
        self.keeping.record.unlink(missing_ok=True)
        if self._adopted is None:
            return super().terminate(grace_s)
        _signal_group(self._adopted, signal.SIGTERM)
        _signal_group(self._adopted, signal.SIGCONT)
        deadline = time.monotonic() + grace_s
        while alive(self._adopted) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.kill()
        return None

    def kill(self) -> None:
        self.keeping.record.unlink(missing_ok=True)
        if self._adopted is None:
            super().kill()
            return
        _signal_group(self._adopted, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while alive(self._adopted) and time.monotonic() < deadline:
            time.sleep(0.02)


def _is_keeper(pid: int, lease: Path) -> bool:
    """Whether `pid` is a keeper of this farm (not a stranger that reuses an old pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"workers.supervision.keeper" in cmdline and str(lease).encode() in cmdline


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
