"""Draining: a worker (an operator's request) or the whole node (shutdown) takes no new jobs.

Jobs sent ahead but not started go back to the queue at once; running ones may finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from gateway.dispatch.links import Links, WorkerLink
from gateway.dispatch.outcomes import Outcomes
from gateway.recovery.leases import Recovery
from workers.client import WorkerError

log = logging.getLogger(__name__)


class Drain:
    def __init__(
        self,
        links: Links,
        recovery: Recovery,
        outcomes: Outcomes,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.links = links
        self.recovery = recovery
        self.outcomes = outcomes
        self.clock = clock
        self.node_draining = False
        """The whole node drains (it shuts down): no intake, no dispatch."""

    async def worker(self, link: WorkerLink) -> None:
        """Take no new jobs; jobs sent but not started go back to the queue at once. A worker
        that does not answer (`gateway.recovery.liveness`) is not asked: its jobs go back when its
        process is stopped."""
        link.draining = True
        log.info("worker %s draining (%d held)", link.name, len(link.held))
        if not link.responsive:
            return
        for job_id in [job_id for job_id in link.held if job_id != link.running]:
            with contextlib.suppress(WorkerError):
                await link.client.delete([job_id])
            await self.recovery.recover(job_id, failed=False)
        self.outcomes.wake()

    def resume(self, link: WorkerLink) -> None:
        link.draining = False
        self.outcomes.wake()

    async def node(self, grace_s: float) -> None:
        """Stop intake and dispatch on this node; wait up to `grace_s` for running jobs.
        Returns within `grace_s` (plus a poll): workers are drained in parallel, and a drain
        still waiting on a worker at the deadline is cancelled (what it held is released when
        the workers stop)."""
        self.node_draining = True
        deadline_s = self.clock() + grace_s
        await self._all(grace_s)
        while self.clock() < deadline_s:
            if not any(link.held for link in self.links):
                break
            await asyncio.sleep(0.05)
        left = sum(len(link.held) for link in self.links)
        log.info("drained: %d jobs still running after the grace", left)

    async def _all(self, timeout_s: float) -> None:
        drains = [asyncio.create_task(self.worker(link)) for link in self.links]
        if not drains:
            return
        _, late = await asyncio.wait(drains, timeout=timeout_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*drains, return_exceptions=True)
        for link, task in zip(self.links, drains, strict=True):
            if task in late:
                log.warning("worker %s: drain cut short after %.1fs", link.name, timeout_s)
            elif task.exception() is not None:
                log.error("worker %s: drain failed", link.name, exc_info=task.exception())
