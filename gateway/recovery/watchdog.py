"""The hang watchdog: a worker that holds jobs and has been silent too long is examined.

Silence has two causes, which the watchdog tells apart by asking the worker (`/system_stats`,
then `/history` and `/queue` for each job it holds):

- the event socket went quiet but the prompt finished: the result comes from `/history`, and
  the relay reconnects (a socket that dropped events once is not trusted again);
- the prompt is stuck: it is interrupted; if it still runs `interrupt_grace_s` later, the
  worker's process is restarted (a worker the gateway does not own has the prompt abandoned).

Either way a job that did not finish goes back to the queue, as a failed attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.dispatch.links import WorkerLink
from gateway.metrics.recorded import Metrics
from gateway.recovery.leases import Found, probe
from workers.client import WorkerError

log = logging.getLogger(__name__)

Recover = Callable[[str], Coroutine[Any, Any, None]]
RestartFor = Callable[[WorkerLink, str], Coroutine[Any, Any, None]]


class Watchdog:
    def __init__(
        self,
        recover: Recover,
        *,
        reconnect: Callable[[WorkerLink], None],
        restart: RestartFor | None = None,
        interrupt_grace_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ):
        self.metrics = metrics or Metrics()
        self.recover = recover
        self.reconnect = reconnect
        self.restart = restart
        self.interrupt_grace_s = interrupt_grace_s
        self.clock = clock

    async def examine(self, link: WorkerLink) -> None:
        """Probe a silent worker and act on what it says (see the module docstring)."""
        quiet_s = self.clock() - link.quiet_since_s()
        self.metrics.stalls.labels(link.name).inc()
        log.warning(
            "worker %s silent for %.1fs holding %s; probing", link.name, quiet_s, sorted(link.held)
        )
        if not await _answers(link):
            await self._unresponsive(link, f"silent for {quiet_s:.0f}s and not answering")
        else:
            stuck = await self._settle(link)
            if stuck:
                await self._unstick(link, stuck, quiet_s)
        link.last_progress_s = self.clock()

    async def hung(self, link: WorkerLink, reason: str) -> None:
        """Its HTTP stopped answering while it holds jobs (`gateway.recovery.liveness`): restart its
        process, or abandon its jobs where this node does not own it, without the probes of
        `examine` (each would wait for a timeout)."""
        log.warning("worker %s hung holding %s: %s", link.name, sorted(link.held), reason)
        self.metrics.hangs.labels(link.name).inc()
        await self._unresponsive(link, f"hung: {reason}")
        link.last_progress_s = self.clock()

    async def _settle(self, link: WorkerLink) -> list[str]:
        """Recover what finished or vanished; returns the running jobs that are stuck."""
        stuck: list[str] = []
        finished = False
        for job_id in list(link.held):
            verdict = await probe(link.client, job_id)
            if verdict.found is Found.HELD and verdict.running:
                stuck.append(job_id)
            elif verdict.found in (Found.FINISHED, Found.ABSENT):
                finished = finished or verdict.found is Found.FINISHED
                log.warning("job %s %s on silent worker %s", job_id, verdict.found, link.name)
                await self.recover(job_id)
        if finished:
            self.reconnect(link)
        return stuck

    async def _unstick(self, link: WorkerLink, stuck: list[str], quiet_s: float) -> None:
        for job_id in stuck:
            held = link.held.get(job_id)
            if held is not None:
                held.abandoned = True
            with contextlib.suppress(WorkerError):
                await link.client.interrupt(job_id)
        if await self._ended(link, stuck):
            log.warning("worker %s: interrupted stuck %s", link.name, stuck)
            for job_id in stuck:
                await self.recover(job_id)
            return
        await self._unresponsive(link, f"hung on {stuck[0]}: no progress for {quiet_s:.0f}s")

    async def _ended(self, link: WorkerLink, job_ids: list[str]) -> bool:
        """Whether none of `job_ids` runs any more, within the interrupt grace."""
        deadline_s = self.clock() + self.interrupt_grace_s
        while True:
            with contextlib.suppress(WorkerError):
                queue = await link.client.queue()
                if not any(job_id in queue.running for job_id in job_ids):
                    return True
            if self.clock() >= deadline_s:
                return False
            await asyncio.sleep(min(0.2, self.interrupt_grace_s / 4))

    async def _unresponsive(self, link: WorkerLink, reason: str) -> None:
        if self.restart is not None and link.handle.managed:
            await self.restart(link, reason)
            return
        log.warning("worker %s %s; abandoning %s", link.name, reason, sorted(link.held))
        for job_id, held in list(link.held.items()):
            held.abandoned = True
            with contextlib.suppress(WorkerError):
                await link.client.delete([job_id])


async def _answers(link: WorkerLink) -> bool:
    try:
        await link.client.get_json("/system_stats")
    except WorkerError:
        return False
    return True
