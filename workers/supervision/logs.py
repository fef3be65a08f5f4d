"""A child's output: copied to a size-rotated file, with its last lines kept for the operator.

One reader thread per run drains the child's pipe (a child must never block on a full pipe);
the file rotates as `worker.log`, `worker.log.1`, ... like `logging.handlers.RotatingFileHandler`.
A worker's keeper (`workers.supervision.keeper`) owns its log; the gateway then only adds its notes
to the
file and reads the tail back from it (`owner=False`).
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import IO

MIB = 1 << 20


class LogCapture:
    """The output of every run of one worker, in one rotated log and one tail."""

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int = 10 * MIB,
        backups: int = 3,
        tail_lines: int = 40,
        owner: bool = True,
    ):
        if max_bytes <= 0 or backups < 0:
            raise ValueError("max_bytes must be positive and backups not negative")
        self.path = path
        self.owner = owner
        """False: another process writes and rotates the file; notes are appended to it."""
        self.max_bytes = max_bytes
        self.backups = backups
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._reader: threading.Thread | None = None

    def tail(self) -> list[str]:
        """The last lines the worker wrote (a progress bar counts as its latest state)."""
        if not self.owner:
            return self._file_tail()
        with self._lock:
            return list(self._tail)

    def note(self, text: str) -> None:
        """A line of the gateway's own (a start, an exit) in the worker's log."""
        line = f"[comfy-gateway] {text}\n".encode()
        if self.owner:
            self._write(line)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as out:  # O_APPEND: whole lines among the owner's
            out.write(line)

    def _file_tail(self, max_bytes: int = 64 * 1024) -> list[str]:
        try:
            with self.path.open("rb") as file:
                file.seek(max(0, file.seek(0, 2) - max_bytes))
                data = file.read()
        except FileNotFoundError:
            return []
        lines = (_shown(line) for line in data.splitlines())
        return [line for line in lines if line.strip()][-(self._tail.maxlen or 1) :]

    def attach(self, stream: IO[bytes]) -> None:
        """Copy `stream` (a child's stdout) until it ends, in a background thread."""
        self._reader = threading.Thread(
            target=self._copy, args=(stream,), name=f"log-{self.path.parent.name}", daemon=True
        )
        self._reader.start()

    def join(self, timeout_s: float = 2.0) -> None:
        """Wait until the output of the last run is written (after the child exited)."""
        if self._reader is not None:
            self._reader.join(timeout_s)

    def close(self) -> None:
        self.join()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _copy(self, stream: IO[bytes]) -> None:
        with stream:
            for line in iter(stream.readline, b""):
                self._write(line)

    def _write(self, line: bytes) -> None:
        text = _shown(line)
        with self._lock:
            if text.strip():
                self._tail.append(text)
            target = self._open()
            target.write(line)
            target.flush()
            if target.tell() >= self.max_bytes:
                self._rotate()

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
        return self._file

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._file = None
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
            return
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))


def _shown(line: bytes) -> str:
    """A line as the tail shows it: a progress bar (carriage returns) at its latest state."""
    return line.decode(errors="replace").rstrip("\n").split("\r")[-1]
