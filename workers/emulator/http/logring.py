"""The last log lines of the instance, kept for `/internal/logs` as ComfyUI's app.logger does.

ComfyUI records every write to stdout and stderr (300 entries) as `{"t": local ISO time,
"m": the text written}`; a logging call writes its line and newline at once, so each entry is
one line ending in "\n". The emulator records its log records the same way.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from datetime import datetime

CAPACITY = 300

LogEntry = dict[str, str]


class LogRing(logging.Handler):
    """A logging handler keeping the last `capacity` formatted lines with their times."""

    def __init__(
        self, capacity: int = CAPACITY, *, now: Callable[[], datetime] = datetime.now
    ) -> None:
        super().__init__()
        self.entries: deque[LogEntry] = deque(maxlen=capacity)
        self._now = now

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.entries.append({"t": self._now().isoformat(), "m": line + "\n"})

    def text(self) -> str:
        """`GET /internal/logs`: every entry as "<time> - <line>", joined."""
        return "".join(f"{entry['t']} - {entry['m']}" for entry in self.entries)
