"""The keeper: the small parent of one worker, so that the worker outlives a gateway crash.

The gateway starts `python -m workers.supervision.keeper ... -- <the worker's command line>` instead
of the
worker itself. The keeper starts the worker, copies its output into the worker's rotated log
(it never writes to a pipe that a dead gateway no longer drains) and passes SIGTERM and SIGINT
on. The worker dies with the keeper (`PR_SET_PDEATHSIG`), the keeper exits as the worker did.

The guarantee, both ways: a kill -9 of the gateway costs no work, since the worker goes on and
the next gateway adopts it (`workers.supervision.process.KeptProcess`); and no worker outlives its
gateway
by more than `--grace-s`: the gateway touches the lease file while it runs, and a keeper whose
lease is older than that stops its worker (SIGTERM, SIGKILL after `STOP_GRACE_S`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from workers.supervision.logs import LogCapture

PR_SET_PDEATHSIG = 1
POLL_S = 0.5
STOP_GRACE_S = 10.0


def lease_age_s(lease: Path, since_s: float) -> float:
    """Seconds since the gateway last touched `lease` (or since `since_s`, if never)."""
    try:
        touched_s = lease.stat().st_mtime
    except FileNotFoundError:
        touched_s = since_s
    return time.time() - max(touched_s, since_s)


def _die_with_keeper() -> None:
    """In the worker, between fork and exec: SIGKILL when the keeper dies. The worker stays in
    the keeper's process group, so a signal to the group reaches both."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m workers.supervision.keeper")
    parser.add_argument("--lease", type=Path, required=True)
    parser.add_argument("--grace-s", type=float, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--log-max-bytes", type=int, default=10 << 20)
    parser.add_argument("--log-backups", type=int, default=3)
    parser.add_argument("--cwd", type=Path, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no worker command after --")
    return args


def keep(args: argparse.Namespace) -> int:
    """Run the worker until it exits (or its lease lapses); returns its exit status."""
    output = LogCapture(args.log, max_bytes=args.log_max_bytes, backups=args.log_backups)
    started_s = time.time()
    worker = subprocess.Popen(
        args.command,
        cwd=args.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_keeper,  # noqa: PLW1509 - prctl only, in the child
    )
    assert worker.stdout is not None
    output.attach(worker.stdout)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            worker.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while (code := _wait(worker, POLL_S)) is None:
        if lease_age_s(args.lease, started_s) > args.grace_s:
            output.note(f"no gateway for {args.grace_s:g} s: stopping the worker")
            code = _stop(worker)
            break
    output.close()
    return code


def _wait(worker: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    try:
        return worker.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None


def _stop(worker: subprocess.Popen[bytes]) -> int:
    worker.terminate()
    try:
        return worker.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        return worker.wait()


def exit_like(code: int) -> None:
    """Exit as the worker did: by the same signal when a signal ended it."""
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's cannot be changed
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    exit_like(keep(_parse(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
