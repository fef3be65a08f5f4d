"""Waiting in tests on something that happens, with a deadline, instead of a fixed sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def rounds_pass(rounds: Callable[[], int], count: int = 3, timeout_s: float = 20.0) -> None:
    """Return once `rounds()` (a loop's round counter) has grown by `count`: whatever the loop
    would have done by then, it has done. Fails after `timeout_s`."""
    target = rounds() + count
    deadline_s = time.monotonic() + timeout_s
    while rounds() < target:
        assert time.monotonic() < deadline_s, f"fewer than {count} rounds in {timeout_s} s"
        await asyncio.sleep(0.01)
