"""Late binding: when a worker of this node has a free slot, give it the next job.

The mechanics live here: take a snapshot of the waiting jobs and the free workers, ask the
pure placement policy, claim each chosen job atomically in Redis (another node may have
taken it), and send it. The policy never sees Redis or HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

from gateway.hub import Hub
from gateway.jobs import JobStore
from gateway.links import Held, Links, WorkerLink, WorkerState
from gateway.models import JobRecord
from gateway.outcomes import Outcomes
from gateway.scheduler.policy import Policy
from gateway.scheduler.snapshot import Assignment, Snapshot, WorkerView
from workers.client import WorkerNoAnswer, WorkerRejected, WorkerUnreachable

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        store: JobStore,
        links: Links,
        policy: Policy,
        hub: Hub,
        *,
        capacity: int = 2,
        window: int = 64,
        poll_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.links = links
        self.policy = policy
        self.hub = hub
        self.capacity = capacity
        self.window = window
        self.poll_s = poll_s
        self.clock = clock
        self.outcomes = Outcomes(store, hub, self.wake)
        self._wake = asyncio.Event()
        self._sends: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Dispatch whenever woken (a new job, a freed slot) and at least every `poll_s`."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            self._wake.clear()
            try:
                await self.dispatch_once()
            except Exception:
                log.exception("dispatch round failed")
                await asyncio.sleep(self.poll_s)

    async def dispatch_once(self) -> int:
        """One round: returns how many jobs were claimed."""
        free = [link for link in self.links if link.free_slots(self.capacity) > 0]
        if not free:
            return 0
        jobs = await self.store.peek(self.window)
        if not jobs:
            return 0
        snapshot = Snapshot(
            now_s=self.store.clock(),
            jobs=tuple(j.job_view() for j in jobs),
            workers=tuple(self._view(link) for link in free),
        )
        claimed = 0
        for assignment in self.policy.assign(snapshot):
            claimed += await self._claim_and_send(assignment)
        return claimed

    def _view(self, link: WorkerLink) -> WorkerView:
        return WorkerView(
            name=link.name,
            group=link.group,
            free_slots=link.free_slots(self.capacity),
            outstanding=len(link.held),
            resident=link.resident,
            last_checkpoint=link.last_checkpoint,
            idle_since_s=link.idle_since_s,
        )

    async def _claim_and_send(self, assignment: Assignment) -> int:
        link = self.links.get(assignment.worker)
        if link is None or link.free_slots(self.capacity) <= 0:
            return 0
        job = await self.store.claim(assignment.job_id, link.name)
        if job is None:
            return 0
        held = Held(
            job.attempt,
            job.client_id,
            job.placement.checkpoint,
            job.placement.model_keys,
            record=job,
            sid=link.sid,
        )
        link.hold(job.job_id, held)
        task = asyncio.create_task(self._send(link, job, held))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)
        return 1

    async def _send(self, link: WorkerLink, job: JobRecord, held: Held) -> None:
        targets = json.loads(job.targets_json) if job.targets_json else None
        try:
            await link.client.submit(
                job.job_id,
                json.loads(job.prompt_json),
                client_id=held.sid or link.sid,
                extra_data=json.loads(job.extra_json),
                partial_execution_targets=targets,
            )
            log.debug("job %s sent to %s attempt %d", job.job_id, link.name, held.attempt)
        except WorkerRejected as exc:
            await self.outcomes.fail(link, job, held, f"worker {link.name} refused: {exc.body}")
        except WorkerUnreachable as exc:
            log.warning(
                "worker %s unreachable, job %s back to the queue: %s", link.name, job.job_id, exc
            )
            link.state = WorkerState.LOST
            fenced = job.with_attempt(held.attempt)
            await self.outcomes.requeue(
                link.name, fenced, failed=False, outcome="unsent", link=link
            )
        except WorkerNoAnswer as exc:
            # Unknown whether it arrived: the lease sweep will ask the worker.
            log.warning("job %s: no answer from %s: %s", job.job_id, link.name, exc)
        except Exception:
            log.exception("job %s: send to %s failed", job.job_id, link.name)

    async def stop(self) -> None:
        for task in list(self._sends):
            task.cancel()
        await asyncio.gather(*self._sends, return_exceptions=True)
