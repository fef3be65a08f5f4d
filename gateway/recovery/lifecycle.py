"""The gateway's side of worker supervision: lifecycle events become job and worker actions.

The supervisor (`workers.supervision.supervisor`) only emits events; this consumer only reacts. An
exit
sends every job the worker held back to the queue (its process is gone, so it holds none: the
probe finds it unreachable). Unless an operator asked for the exit, the job it was running
counts a failed attempt, and the exit is blamed on it with the supervisor; at the job's
`quarantine_after`-th crash it is quarantined, and the supervisor told to excuse every exit
it caused (before it decides on this one), so poison prompts never make workers flap.
A ready worker seeds the scheduler's load estimates with its warm-up timings and its speeds with
the warm-up's speed probes, is marked cold if it warmed nothing up and was started by this
gateway (the dispatcher then warms it up once it sits idle: `gateway.scheduler.warming`), and
wakes the dispatcher.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.dispatch.links import Links, WorkerLink, WorkerState
from gateway.dispatch.outcomes import Outcomes
from gateway.recovery.leases import Recovery
from workers.supervision.events import LifecycleKind, Phase, WorkerEvent
from workers.supervision.supervisor import Supervisor
from workers.warmup.prompts import WarmupResult

log = logging.getLogger(__name__)


class Supervision:
    def __init__(
        self,
        links: Links,
        recovery: Recovery,
        outcomes: Outcomes,
        publish: Callable[[], Awaitable[None]],
    ):
        self.links = links
        self.recovery = recovery
        self.outcomes = outcomes
        self.publish = publish
        """Publishes this node's worker records (`gateway.farm.registry`) after each event."""
        self.supervisor: Supervisor | None = None

    # -- lifecycle events ----------------------------------------------------------------------

    def attach(self, supervisor: Supervisor) -> None:
        """Consume its events from now on; take in what its ready workers measured so far."""
        for link in self.links:
            status = supervisor.status(link.name)
            if status is not None and status.phase is Phase.READY:
                self.seed(link, status.warmups)
                link.cold = status.cold
        self.supervisor = supervisor
        supervisor.subscribe(self.on_event)

    async def on_event(self, event: WorkerEvent) -> None:
        link = self.links.get(event.worker)
        if link is None:
            return
        if event.kind is LifecycleKind.EXITED:
            await self._exited(link, event)
        elif event.kind is LifecycleKind.READY:
            self.seed(link, event.warmups)
            status = self.supervisor.status(link.name) if self.supervisor else None
            link.cold = status is not None and status.cold
            self.outcomes.wake()
        with contextlib.suppress(Exception):
            await self.publish()

    async def _exited(self, link: WorkerLink, event: WorkerEvent) -> None:
        link.state = WorkerState.LOST
        link.resident, link.last_checkpoint = (), None
        log.warning("worker %s exited (%s); %d jobs held", link.name, event.reason, len(link.held))
        await self.recovery.worker_exited(link, failure=event.failure)
        self._blame(link)

    def _blame(self, link: WorkerLink) -> None:
        """Tell the supervisor which prompt the exit is blamed on; if that prompt is now
        quarantined, excuse all the exits it caused, on every worker."""
        culprit = self.recovery.culprits.pop(link.name, None)
        if culprit is None or self.supervisor is None:
            return
        self.supervisor.attribute(link.name, culprit)
        if culprit in self.recovery.quarantined:
            self.recovery.quarantined.discard(culprit)
            self.supervisor.excuse(culprit)

    def seed(self, link: WorkerLink, warmups: tuple[WarmupResult, ...]) -> None:
        """Its warm-ups seed what is believed of it (`WorkerLink.warmed`). (Whether it is cold,
        having run nothing, is its supervisor's `WorkerStatus.cold`.)"""
        link.warmed(warmups)

    async def release(self, link: WorkerLink, job_ids: set[str], *, failed: bool) -> None:
        """Settle jobs of a worker whose process is gone: finished ones are recorded, the rest
        go back to the queue."""
        for job_id in sorted(job_ids):
            try:
                await self.recovery.recover(job_id, failed=failed)
            except Exception:
                log.exception("job %s of %s not recovered; the lease sweep retries", job_id, link)
