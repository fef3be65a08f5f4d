"""Leases and lost workers: every held job ends up finished or back in the queue.

A job is put back in the queue only once its worker is known not to hold it: the worker's
`/history` has no entry and its `/queue` does not list it, or it refuses connections (its
process is gone, and ComfyUI keeps its queue in memory). A worker that answers but does not
say is asked again at the next sweep.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gateway import tasks
from gateway.dispatch.dispatcher import REDIS_DOWN, Guard
from gateway.dispatch.links import Held, Links, WorkerLink, WorkerState
from gateway.dispatch.outcomes import Outcomes
from gateway.jobs.models import HELD, JobRecord, JobState
from gateway.jobs.store import JobStore
from workers.client import ComfyClient, WorkerError, WorkerUnreachable

log = logging.getLogger(__name__)

StallHandler = Callable[[WorkerLink], Coroutine[Any, Any, None]]
HEARD_POLL_S = 0.01
CRASHED = "crashed its worker"
"""The outcome of an attempt whose worker died running it (counted towards quarantine)."""


class Found(StrEnum):
    FINISHED = "finished"
    HELD = "held"
    ABSENT = "absent"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    found: Found
    entry: dict[str, Any] | None = None
    running: bool = False


async def probe(client: ComfyClient, job_id: str) -> Verdict:
    """Where is this prompt on that worker: finished, still queued or running, or absent?"""
    try:
        entry = await client.history(job_id)
        if entry is not None:
            return Verdict(Found.FINISHED, entry)
        queue = await client.queue()
        if queue.holds(job_id):
            return Verdict(Found.HELD, running=job_id in queue.running)
        # It may have finished between the two questions.
        entry = await client.history(job_id)
        return Verdict(Found.FINISHED, entry) if entry else Verdict(Found.ABSENT)
    except WorkerUnreachable:
        return Verdict(Found.ABSENT)
    except WorkerError:
        return Verdict(Found.UNKNOWN)


class Recovery:
    def __init__(
        self,
        store: JobStore,
        links: Links,
        outcomes: Outcomes,
        *,
        lease_s: float,
        stall_timeout_s: float,
        on_stall: StallHandler,
        quarantine_after: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.links = links
        self.outcomes = outcomes
        self.lease_s = lease_s
        self.stall_timeout_s = stall_timeout_s
        self.on_stall = on_stall
        """Called for a worker whose prompt made no progress for `stall_timeout_s` (the
        watchdog: it probes the worker before it acts)."""
        self.quarantine_after = quarantine_after
        """Crashes of its worker after which a job is quarantined as poison."""
        self.clock = clock
        self.culprits: dict[str, str] = {}
        """By worker: the job blamed for its last exit, until supervision takes it."""
        self.quarantined: set[str] = set()
        """Jobs quarantined here whose exits supervision has not excused yet."""
        self.guard: Guard | None = None
        """Asked before each round: none while Redis is down, a restart repaired first."""

    @property
    def interval_s(self) -> float:
        """Also how often jobs that send no events are polled, hence at most a second."""
        return min(1.0, max(0.05, self.lease_s / 4))

    async def run(self) -> None:
        """Renew the leases of healthy workers, notice lost ones, recover expired jobs."""
        while True:
            tasks.check_cancelled()
            try:
                await self.tick()
            except Exception as exc:
                if self.guard is not None and isinstance(exc, REDIS_DOWN):
                    self.guard.suspect()
                log.exception("recovery round failed")
            await asyncio.sleep(self.interval_s)

    async def tick(self) -> None:
        if self.guard is not None and not await self.guard.ready():
            return
        now_s = self.clock()
        for link in self.links:
            if link.healthy(now_s, self.stall_timeout_s):
                await self.store.renew(link.held)
            elif link.handle.managed and not link.handle.alive():
                await self.worker_lost(link)
            elif link.stalled(now_s, self.stall_timeout_s):
                await self.on_stall(link)
        for link in self.links:
            for job_id in link.deaf():
                await self.recover(job_id, failed=False)
        for job_id in await self.store.expired():
            await self.recover(job_id, failed=True)

    # -- whole workers -----------------------------------------------------------------------

    async def worker_lost(self, link: WorkerLink) -> None:
        """Its process exited: nothing it held survives, so every job goes back."""
        if link.state is WorkerState.LOST and not link.held:
            return
        code = link.handle.process.returncode if link.handle.process else None
        log.warning(
            "worker %s lost (exit code %s); recovering %d jobs", link.name, code, len(link.held)
        )
        link.state = WorkerState.LOST
        await self.worker_exited(link, failure=True)

    async def worker_exited(self, link: WorkerLink, *, failure: bool) -> None:
        """Its process is gone with everything it held: each job is recorded as finished or
        goes back to the queue. Only the job it was running pays for the exit, and only when
        nobody asked for it (`failure`): a failed attempt, or at its `quarantine_after`-th
        such crash, quarantine. Jobs sent ahead that never started are not charged."""
        if failure:
            await _heard_all(link)
        job_ids = set(link.held) | await self.store.worker_job_ids(link.name)
        culprit = await self._culprit(link, job_ids) if failure else None
        if culprit is not None:
            self.culprits[link.name] = culprit
        for job_id in sorted(job_ids):
            try:
                await self.recover(job_id, failed=False, crashed=job_id == culprit)
            except Exception:
                log.exception(
                    "job %s of %s not recovered; the lease sweep retries", job_id, link.name
                )

    async def _culprit(self, link: WorkerLink, job_ids: set[str]) -> str | None:
        """The job the worker was running: the one it announced, else the one Redis has as
        running, else the one it would have started first (the lowest queue score: it may
        have died before its first event about it arrived)."""
        ended = {job_id for job_id, held in link.held.items() if held.ended}
        if link.running in job_ids and link.running not in ended:
            return link.running
        records = await self.store.get_many(sorted(job_ids - ended))
        held = [r for r in records if r.state in HELD and r.worker == link.name]
        running = [r for r in held if r.state is JobState.RUNNING]
        candidates = running or held
        return min(candidates, key=lambda r: r.score).job_id if candidates else None

    async def reconcile(self, link: WorkerLink) -> None:
        """On (re)connect: adopt what the worker still runs, record what it finished, requeue
        what it lost. Then it may take jobs again."""
        for job_id in set(link.held) | await self.store.worker_job_ids(link.name):
            await self.recover(job_id, failed=False)
        if link.handle.alive():
            link.state = WorkerState.READY
            link.last_progress_s = self.clock()
            self.outcomes.wake()

    # -- single jobs -------------------------------------------------------------------------

    async def recover(self, job_id: str, *, failed: bool, crashed: bool = False) -> None:
        """Settle one held job by asking its worker: finished, still held, or gone (then back
        to the queue, a failed attempt if `failed`; if `crashed`, the crash of its worker
        counts towards quarantine)."""
        job = await self.store.get(job_id)
        if job is None or job.state not in HELD or not job.worker:
            await self.store.redis.zrem(self.store.keys.leases, job_id)
            return
        link = self.links.get(job.worker)
        if link is None:
            # Another node's worker: that node renews it while alive; nothing to ask here.
            return
        verdict = await probe(link.client, job_id)
        await self._act(link, job, verdict, failed, crashed)

    async def _act(
        self, link: WorkerLink, job: JobRecord, verdict: Verdict, failed: bool, crashed: bool
    ) -> None:
        held = link.held.get(job.job_id) or _held_from(job)
        if verdict.found is Found.FINISHED:
            if await self.outcomes.complete(link, job.job_id, held, verdict.entry):
                self.outcomes.metrics.recovered.labels(link.name, "finished").inc()
        elif verdict.found is Found.HELD:
            self._adopt(link, job, held, verdict.running)
            await self.store.renew([job.job_id])
        elif verdict.found is Found.ABSENT and held.ended and held.heard.ended:
            # It ended (we heard it) and its worker died before we read its entry.
            await self.outcomes.complete(link, job.job_id, held, held.heard.entry(job))
        elif crashed and (verdict.found is Found.ABSENT or not link.handle.alive()):
            await self._crashed(link, job, held)
        elif verdict.found is Found.ABSENT:
            reason = "lost by its worker" if link.handle.alive() else "worker exited"
            await self.outcomes.requeue(
                link.name, job, failed=failed or held.abandoned, outcome=reason, link=link
            )
        elif link.handle.managed and not link.handle.alive():
            await self.outcomes.requeue(
                link.name, job, failed=failed, outcome="worker exited", link=link
            )

    async def _crashed(self, link: WorkerLink, job: JobRecord, held: Held) -> None:
        """Its worker died running it: a failed attempt, or at the `quarantine_after`-th
        crash (earlier attempts that ended so included) the job is quarantined."""
        earlier = await self.store.attempts(job.job_id)
        crashes = 1 + sum(1 for attempt in earlier if attempt.get("outcome") == CRASHED)
        if crashes < self.quarantine_after:
            await self.outcomes.requeue(link.name, job, failed=True, outcome=CRASHED, link=link)
        elif await self.outcomes.quarantine(link, job, held, crashes):
            self.quarantined.add(job.job_id)

    def _adopt(self, link: WorkerLink, job: JobRecord, held: Held, running: bool) -> None:
        if job.job_id not in link.held:
            log.info("job %s adopted on %s (attempt %d)", job.job_id, link.name, job.attempt)
            link.hold(job.job_id, held)
            self.outcomes.metrics.recovered.labels(link.name, "adopted").inc()
        if running and link.running != job.job_id:
            link.running = job.job_id
        if held.sid != link.sid:
            # No events will tell its progress: still held by a live worker is all we know.
            link.last_progress_s = self.clock()


async def _heard_all(link: WorkerLink, timeout_s: float = 1.0) -> None:
    """Wait, a second at most, until the relay has read a dead worker's last frames (its
    socket closes at once): the end of a job it finished just before dying must be known
    before a crash is blamed on the job it ran last."""
    for _ in range(int(timeout_s / HEARD_POLL_S)):
        if not link.listening:
            return
        await asyncio.sleep(HEARD_POLL_S)


def _held_from(job: JobRecord) -> Held:
    p = job.placement
    return Held(job.attempt, job.client_id, p.checkpoint, p.model_keys)
