"""One gateway per data dir: an exclusive `flock` on `DATA_DIR/gateway.lock`.

Two gateways on one data dir would run two Redis servers on one AOF, overwrite each other's
images and repeat prompt numbers. The lock is the kernel's: it is held while the file stays
open and released when the process ends however it ends (a kill -9 included), so a lock file
left by a dead gateway never blocks the next one. The descriptor is not inherited by child
processes (Python opens files close-on-exec), so a worker that outlives its gateway for a
moment does not hold the lock either. The holder writes its pid into the file, for the message
a second gateway prints.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = "gateway.lock"


class DataDirBusy(Exception):
    """Another live process holds the lock of this data dir."""

    def __init__(self, data_dir: Path, holder_pid: int | None):
        holder = f"pid {holder_pid}" if holder_pid is not None else "a process of unknown pid"
        super().__init__(
            f"data dir {data_dir} is in use by another gateway ({holder}); stop it, or give "
            "this one its own --data-dir"
        )
        self.data_dir = data_dir
        self.holder_pid = holder_pid


class DataDirLock:
    """The exclusive lock of one data dir, for as long as this object holds it."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.path = data_dir / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock now or raise `DataDirBusy` at once (never waits); creates the dir."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(handle)
            handle.close()
            raise DataDirBusy(self.data_dir, holder) from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Let the next gateway take the data dir (the file stays; an unlocked file is free)."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _pid_in(handle: IO[str]) -> int | None:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else None
