"""A deadline on pure-Python work in the main thread: a benchmark cuts a runaway call instead
of waiting for it."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Overrun(Exception):
    """The work ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise `Overrun` in this thread once `seconds` have passed (pure-Python calls only). An
    alarm set before (pytest-timeout's) is put back with what was left of it."""

    def fire(signum: int, frame: FrameType | None) -> None:
        raise Overrun

    previous = signal.signal(signal.SIGALRM, fire)
    began = time.monotonic()
    outer_s, outer_every_s = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
        if outer_s > 0:
            left_s = max(outer_s - (time.monotonic() - began), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left_s, outer_every_s)
