"""Background tasks: loops that outlive their failures, and a stop that cannot hang.

On Python 3.11 a cancel can be lost: `asyncio.wait_for` returns normally, swallowing the
cancel, when it arrives in the loop iteration where the awaited thing completes (CPython
gh-86296, fixed in 3.12). redis-py sends every command through `wait_for` once the client has
a `socket_timeout`, so any loop that talks to Redis can swallow the cancel meant to end it,
and `task.cancel(); await task` then waits forever. The task still counts the cancel, though:
loops call `check_cancelled` between rounds, and `stop` cancels again until the task ends and
gives up, loudly, after a grace period.

A loop that drains something already buffered (frames read from a socket, a queue filled
meanwhile) never suspends on its own: `recv()` and `Queue.get()` return at once while anything
waits. Such loops take `Turns` so that a flood of events cannot keep the event loop from every
HTTP request, timer and other socket of the process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

Body = Callable[[], Awaitable[None]]

TURN_S = 0.001
"""Seconds a draining loop may run before it lets the other tasks run."""


class Turns:
    """Lets the other tasks of the event loop run once this one has run `slice_s` since it
    last did (`take`, after each item). Four workers' relays fed a flood of sampler
    `progress` frames, none yielding, held the loop for seconds at a time: POSTs waited 5 to
    15 s and uvicorn closed a keep-alive connection under a request it had not read yet."""

    def __init__(self, slice_s: float = TURN_S, clock: Callable[[], float] = time.perf_counter):
        self.slice_s = slice_s
        self.clock = clock
        self._since = clock()

    async def take(self) -> None:
        if self.clock() - self._since >= self.slice_s:
            await asyncio.sleep(0)
            self._since = self.clock()


def check_cancelled() -> None:
    """Raise CancelledError if the current task was asked to stop, even when a library lost
    the cancel on the way."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def spawn(name: str, body: Body, *, retry_s: float = 1.0) -> asyncio.Task[None]:
    """A task that runs `body` for as long as it lives (see `forever`)."""
    return asyncio.create_task(forever(name, body, retry_s=retry_s), name=name)


async def forever(name: str, body: Body, *, retry_s: float = 1.0) -> None:
    """Run `body` again `retry_s` after it fails or returns: a bug in one round is logged and
    never ends a background loop silently. Only cancellation ends it."""
    while True:
        check_cancelled()
        try:
            await body()
        except Exception:
            log.exception("%s failed; restarting in %.1fs", name, retry_s)
        else:
            log.error("%s returned; restarting in %.1fs", name, retry_s)
        await asyncio.sleep(retry_s)


async def stop(
    tasks: Iterable[asyncio.Task[Any]], *, grace_s: float = 10.0, again_s: float = 3.0
) -> None:
    """Cancel `tasks` and wait for them to end, cancelling again every `again_s` while one
    still runs (a lost cancel). `again_s` leaves time for a clean exit (a WebSocket close
    handshake takes up to 2s). Returns within about `grace_s`, logging the tasks left running
    and the failures of those that ended."""
    every = list(tasks)
    pending = {task for task in every if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        wait_s = min(again_s, max(0.0, deadline - loop.time()))
        _, pending = await asyncio.wait(pending, timeout=wait_s)
        for task in pending:
            log.warning("task %s still runs %.1fs after a cancel", task.get_name(), again_s)
    for task in pending:
        log.error("task %s did not stop within %.1fs; left running", task.get_name(), grace_s)
    _report_failures(task for task in every if task.done())


def _report_failures(tasks: Iterable[asyncio.Task[Any]]) -> None:
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s had failed", task.get_name(), exc_info=task.exception())
