"""The API's operations on prompts this node may hold: interrupt, delete, clear.

A prompt is acted on where it is: dropped from the queue while it waits, taken out of a
worker's queue when it was sent ahead but has not started, interrupted where it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection

from gateway.dispatch.links import Links, WorkerLink
from gateway.dispatch.outcomes import Outcomes
from gateway.events.hub import Hub
from gateway.jobs.models import JobRecord, JobState
from gateway.jobs.store import JobStore
from gateway.metrics.recorded import Metrics
from gateway.recovery.leases import Found, probe
from workers.client import WorkerError


class Operations:
    def __init__(
        self, store: JobStore, links: Links, hub: Hub, outcomes: Outcomes, metrics: Metrics
    ):
        self.store = store
        self.links = links
        self.hub = hub
        self.outcomes = outcomes
        self.metrics = metrics

    async def interrupt(self, job_id: str) -> None:
        """Stop this prompt only: drop it while it waits, interrupt it where it runs."""
        job = await self.store.get(job_id)
        if job is not None and job.state is JobState.PENDING:
            if await self._cancel_pending(job_id):
                self.hub.queue_changed()
                return
            job = await self.store.get(job_id)
        link = self.links.get(job.worker) if job else None
        if job is None or link is None or job.state.terminal:
            return
        if job.state is JobState.RUNNING or link.running == job_id:
            await link.client.interrupt(job_id)
        else:
            await self._withdraw(link, job, interrupt_if_running=True)

    async def interrupt_client(self, client_id: str) -> list[str]:
        """Interrupt the running prompts of one client (never anyone else's)."""
        stopped = []
        for link in self.links:
            held = link.held.get(link.running) if link.running else None
            if held is not None and held.client_id == client_id and link.running:
                with contextlib.suppress(WorkerError):
                    await link.client.interrupt(link.running)
                    stopped.append(link.running)
        return stopped

    async def delete(self, job_id: str) -> None:
        """POST /queue delete: remove a prompt that has not started, wherever it waits."""
        if await self._cancel_pending(job_id):
            self.hub.queue_changed()
            return
        job = await self.store.get(job_id)
        link = self.links.get(job.worker) if job else None
        if job is not None and link is not None and job.state is JobState.ASSIGNED:
            await self._withdraw(link, job, interrupt_if_running=False)

    async def clear_pending(self, client_ids: Collection[str] | None = None) -> int:
        """POST /queue clear: every prompt of these clients (None: of every client) that has
        not started, also those already sent ahead to a worker of this node (ComfyUI's clear
        empties its whole pending queue)."""
        cancelled = 0
        for job in await self.store.get_many(await self.store.pending_ids()):
            if client_ids is None or job.client_id in client_ids:
                cancelled += await self._cancel_pending(job.job_id)
        for link in self.links:
            for job_id, held in list(link.held.items()):
                mine = client_ids is None or held.client_id in client_ids
                if job_id != link.running and mine:
                    await self.delete(job_id)
        self.hub.queue_changed()
        return cancelled

    async def _cancel_pending(self, job_id: str) -> bool:
        cancelled = await self.store.cancel_pending(job_id)
        if cancelled:
            self.metrics.pending_cancelled()
        return cancelled

    async def _withdraw(
        self, link: WorkerLink, job: JobRecord, *, interrupt_if_running: bool
    ) -> None:
        """A prompt sent to a worker but not started: take it out of that worker's queue."""
        with contextlib.suppress(WorkerError):
            await link.client.delete([job.job_id])
        verdict = await probe(link.client, job.job_id)
        if verdict.found is Found.ABSENT:
            await self.outcomes.cancel(link, job)
        elif verdict.found is Found.HELD and verdict.running and interrupt_if_running:
            await link.client.interrupt(job.job_id)
