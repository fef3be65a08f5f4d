"""Liveness: each connected worker's HTTP must answer a cheap request within seconds.

A worker that does not answer (a hung or stopped process: its kernel still accepts the
connection and nothing reads it) leaves the ready set at the first failed probe: it is sent
no new work, and the farm-wide routes and the proxy do not wait for it. It is back in the set
as soon as it answers again. One that holds jobs and has neither answered nor sent an event
of them for `hang_after_s` is reported hung, once per episode (the farm restarts it, or
abandons its jobs where this node does not own its process).

A worker merely busy on a long job still answers (ComfyUI serves HTTP from its own thread
while it samples), so it is never taken for hung here: silence of its events stays the stall
watchdog's case (`gateway.recovery.watchdog`), as before.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from gateway import tasks
from gateway.dispatch.links import Links, WorkerLink, WorkerState

log = logging.getLogger(__name__)

Ping = Callable[[WorkerLink, float], Awaitable[bool]]
OnHung = Callable[[WorkerLink, str], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class LivenessSettings:
    interval_s: float = 1.0
    """Time between two probes of one worker."""
    timeout_s: float = 2.0
    """A probe not answered within this fails: the worker leaves the ready set."""
    hang_after_s: float = 10.0
    """Unanswered this long while it holds jobs: it is hung."""


async def ping(link: WorkerLink, timeout_s: float) -> bool:
    """Whether the worker's HTTP answers within `timeout_s`."""
    return await link.client.answers(timeout_s)


class Liveness:
    """Probes every worker of `links` in the background, each on its own loop (one hung
    worker never delays the probes of the others)."""

    def __init__(
        self,
        links: Links,
        on_hung: OnHung,
        settings: LivenessSettings | None = None,
        *,
        on_change: Callable[[], None] = lambda: None,
        probe: Ping = ping,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.links = links
        self.on_hung = on_hung
        self.settings = settings or LivenessSettings()
        self.on_change = on_change
        self.probe = probe
        self.clock = clock
        self._reported: set[str] = set()

    def spawn(self) -> list[asyncio.Task[None]]:
        """One background task per worker; the caller stops them (`gateway.tasks.stop`)."""
        return [
            tasks.spawn(f"liveness-{link.name}", functools.partial(self.watch, link))
            for link in self.links
        ]

    async def watch(self, link: WorkerLink) -> None:
        while True:
            tasks.check_cancelled()
            await self.check(link)
            await asyncio.sleep(self.settings.interval_s)

    async def check(self, link: WorkerLink) -> None:
        """One probe of `link` and what follows from it. A worker not connected, or not up
        by its supervisor, is not probed: its state already keeps it out of the ready set."""
        if link.state is not WorkerState.READY or not link.handle.ready:
            self._answered(link)
            return
        if await self.probe(link, self.settings.timeout_s):
            self._answered(link)
        else:
            await self._unanswered(link)

    def _answered(self, link: WorkerLink) -> None:
        self._reported.discard(link.name)
        if link.unresponsive_since_s is None:
            return
        if link.state is WorkerState.READY:
            down_s = self.clock() - link.unresponsive_since_s
            log.warning("worker %s answers again after %.1fs", link.name, down_s)
        link.unresponsive_since_s = None
        self.on_change()

    async def _unanswered(self, link: WorkerLink) -> None:
        now_s = self.clock()
        if link.unresponsive_since_s is None:
            # The probe itself waited `timeout_s`: the silence started before it.
            link.unresponsive_since_s = now_s - self.settings.timeout_s
            log.warning(
                "worker %s not answering within %.1fs; out of the ready set (holds %s)",
                link.name,
                self.settings.timeout_s,
                sorted(link.held),
            )
            self.on_change()
        down_s = now_s - link.unresponsive_since_s
        if self._hung(link, now_s, down_s):
            self._reported.add(link.name)
            await self.on_hung(link, f"not answering for {down_s:.0f}s, no event either")

    def _hung(self, link: WorkerLink, now_s: float, down_s: float) -> bool:
        """Holds jobs, and for `hang_after_s` neither answered nor sent an event of them
        (a gateway too loaded to read answers in time still reads the events of a worker
        that samples: that is no hang)."""
        limit_s = self.settings.hang_after_s
        quiet_s = now_s - link.quiet_since_s()
        fresh = link.name not in self._reported
        return bool(link.held) and fresh and down_s >= limit_s and quiet_s >= limit_s
