"""Readiness polling: ask "are you up yet?" until yes, the thing died, or a deadline passed.

One loop for every child that must answer before it is used (a ComfyUI or an emulator, the
gateway's Redis, a gateway started by a test or a bench). The probe says what "ready" means;
`gone` says why waiting is pointless (the process exited); the clock and the sleep are
injected so tests drive the deadline without waiting for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx


class NotReady(RuntimeError):
    """The polled thing did not become ready: it is gone (`exited`) or the deadline passed."""

    def __init__(self, reason: str, *, exited: bool):
        super().__init__(reason)
        self.reason = reason
        self.exited = exited


@dataclass(frozen=True)
class Pacing:
    """How often to ask: `first_s` after the first miss, then times `growth`, up to `max_s`."""

    first_s: float = 0.05
    growth: float = 1.0
    max_s: float = 0.05

    def after(self, interval_s: float) -> float:
        return min(interval_s * self.growth, self.max_s)


STEADY = Pacing()


def _never_gone() -> str | None:
    return None


def wait_until(
    ready: Callable[[], bool],
    timeout_s: float,
    *,
    gone: Callable[[], str | None] = _never_gone,
    pacing: Pacing = STEADY,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Call `ready` until it returns True; returns the seconds that took (by `clock`).

    Raises NotReady(exited=True) as soon as `gone` gives a reason, NotReady(exited=False) once
    `timeout_s` passed without a yes. `ready` is asked at least once, even with no time left.
    """
    started_s = clock()
    deadline_s = started_s + timeout_s
    interval_s = pacing.first_s
    while True:
        if (reason := gone()) is not None:
            raise NotReady(reason, exited=True)
        if ready():
            return clock() - started_s
        if clock() >= deadline_s:
            raise NotReady(f"not ready after {timeout_s:g} s", exited=False)
        sleep(interval_s)
        interval_s = pacing.after(interval_s)


async def await_until(
    ready: Callable[[], Awaitable[bool]],
    timeout_s: float,
    *,
    gone: Callable[[], str | None] = _never_gone,
    pacing: Pacing = STEADY,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> float:
    """`wait_until` for an async probe, sleeping without blocking the loop."""
    started_s = clock()
    deadline_s = started_s + timeout_s
    interval_s = pacing.first_s
    while True:
        if (reason := gone()) is not None:
            raise NotReady(reason, exited=True)
        if await ready():
            return clock() - started_s
        if clock() >= deadline_s:
            raise NotReady(f"not ready after {timeout_s:g} s", exited=False)
        await sleep(interval_s)
        interval_s = pacing.after(interval_s)


def answers_200(client: httpx.Client, url: str) -> Callable[[], bool]:
    """A probe: `GET url` answers 200 (a refused or timed-out connection is a no)."""

    def probe() -> bool:
        try:
            return client.get(url).status_code == 200
        except httpx.TransportError:
            return False

    return probe
