"""How a held job leaves a worker: finished, failed, requeued or cancelled.

Each path writes Redis first (atomically, fenced by the attempt) and only then tells the
client, so a client that reads `/history` after `executing null` always finds the entry. The
terminal event (`execution_success` or `execution_error`) is sent from the recorded entry too,
never live from the worker: the fenced write applies once, so a client hears it exactly once,
whether the job ended under this gateway or under one that crashed before recording it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gateway.dispatch.links import Held, WorkerLink
from gateway.events.frames import text_frame
from gateway.events.hub import Hub
from gateway.jobs.history import entry_state, error_entry, gateway_entry
from gateway.jobs.models import JobRecord, JobState
from gateway.jobs.store import JobStore
from gateway.learning.learn import Finished, finished
from gateway.ledger.book import LedgerBook
from gateway.metrics.recorded import Metrics
from workers.comfy.messages import EventKind

log = logging.getLogger(__name__)
TERMINAL_KINDS = frozenset({EventKind.EXECUTION_SUCCESS, EventKind.EXECUTION_ERROR})


class Outcomes:
    def __init__(
        self,
        store: JobStore,
        hub: Hub,
        wake: Callable[[], None],
        metrics: Metrics | None = None,
        twins: Callable[[WorkerLink], Sequence[WorkerLink]] = lambda link: (),
    ):
        self.store = store
        self.hub = hub
        self.wake = wake
        self.twins = twins
        """The workers that learn from a worker's jobs as it does (`Links.twins`)."""
        self.metrics = metrics or Metrics(store.now_ms)
        self.ledgers: LedgerBook | None = LedgerBook(store.now_ms)
        self.on_end: Callable[[str], None] = _ignore
        """Told the id of each job that ended here (ran, failed, cancelled, given up)."""

    async def complete(
        self, link: WorkerLink, job_id: str, held: Held, worker_entry: Mapping[str, Any] | None
    ) -> bool:
        """Record the worker's history entry as the job's result, then send `executing null`."""
        if not held.abandoned:
            self.on_end(job_id)
        job = held.record if held.record is not None else await self.store.get(job_id)
        if job is not None and held.started_at_ms is not None:
            job = replace(job, started_at_ms=held.started_at_ms)
        if job is None:
            self._forget(link, job_id)
            return False
        if held.abandoned:
            fenced = job.with_attempt(held.attempt)
            await self.requeue(link.name, fenced, failed=True, outcome="stalled", link=link)
            return False
        if worker_entry is None:
            entry = error_entry(
                job,
                self.store.now_ms(),
                "the worker reported completion but has no history entry",
                "GatewayError",
            )
        else:
            entry = gateway_entry(worker_entry, job, link.name)
        prompt = _prompt_of(job)
        ledger = self._ledger(link, job, held, prompt, entry)
        text = "" if ledger is None else json.dumps(ledger, separators=(",", ":"))
        applied = await self._finish(link, job, held, entry, ledger=text)
        self._forget(link, job_id)
        if held.checkpoint:
            link.last_checkpoint = held.checkpoint
        done = _learn(link, job, held, prompt, self.twins(link))
        if applied and done is not None:
            cached = len(held.clock.cached) if held.clock is not None else 0
            self.metrics.models_used(link.name, held.checkpoint, done.loader_cached, cached)
        if applied and ledger is not None and ledger["timed"]:
            self.metrics.observe_phases(
                ledger["phases"], worker=link.name, group=link.group, checkpoint=held.checkpoint
            )
        if applied:
            log.info(
                "job %s %s on %s attempt %d", job_id, entry_state(entry), link.name, held.attempt
            )
            self._tell_end(held.client_id, entry)
            await self._done(held.client_id, job_id)
        return applied

    def _ledger(
        self,
        link: WorkerLink,
        job: JobRecord,
        held: Held,
        prompt: Mapping[str, Any],
        entry: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        """The job's phase ledger; never at the cost of the job's answer (then none)."""
        if self.ledgers is None:
            return None
        try:
            return self.ledgers.of(link, job, held, prompt, entry, entry_state(entry).value)
        except Exception:
            log.exception("the ledger of job %s on %s failed", job.job_id, link.name)
            return None

    async def fail(
        self,
        link: WorkerLink,
        job: JobRecord,
        held: Held,
        message: str,
        *,
        exception_type: str = "WorkerRejectedPrompt",
    ) -> None:
        """End a job with an error that retrying elsewhere would not fix; its slot is freed
        and its history entry carries `message`."""
        entry = error_entry(job, self.store.now_ms(), message, exception_type)
        await self._end_in_error(link, job, held, entry, entry_state(entry))

    async def quarantine(self, link: WorkerLink, job: JobRecord, held: Held, crashes: int) -> bool:
        """End a poison job, one that crashed its worker `crashes` times: state `quarantined`,
        an error entry in its history, never run again; its record, workflow included, stays
        (for `job_ttl_s`) at /gateway/jobs/{id}. False when fenced off (ended elsewhere)."""
        message = (
            f"quarantined: this prompt crashed its worker {crashes} times (last {link.name}), "
            f"so it is not run again; its workflow is kept at /gateway/jobs/{job.job_id}"
        )
        entry = error_entry(job, self.store.now_ms(), message, "GatewayQuarantined")
        applied = await self._end_in_error(link, job, held, entry, JobState.QUARANTINED)
        if applied:
            log.warning(
                "job %s quarantined after %d crashes (last %s)", job.job_id, crashes, link.name
            )
        return applied

    async def _end_in_error(
        self,
        link: WorkerLink,
        job: JobRecord,
        held: Held,
        entry: Mapping[str, Any],
        state: JobState,
    ) -> bool:
        self.on_end(job.job_id)
        applied = await self._finish(link, job, held, entry, state)
        self._forget(link, job.job_id)
        if applied and held.client_id:
            error = entry["status"]["messages"][-1][1]
            self.hub.publish(text_frame(held.client_id, EventKind.EXECUTION_ERROR, error))
        if applied:
            await self._done(held.client_id, job.job_id)
        return applied

    async def _finish(
        self,
        link: WorkerLink,
        job: JobRecord,
        held: Held,
        entry: Mapping[str, Any],
        state: JobState | None = None,
        *,
        ledger: str = "",
    ) -> bool:
        """The fenced final write (in `state`, else the entry's own), counted once written."""
        state = state or entry_state(entry)
        applied = await self._write_end(link, job.job_id, held, entry, state, ledger)
        if applied:
            self.metrics.job_ended(job, state, link.name, link.group)
        return applied

    async def _write_end(
        self,
        link: WorkerLink,
        job_id: str,
        held: Held,
        entry: Mapping[str, Any],
        state: JobState,
        ledger: str,
    ) -> bool:
        """Fenced off because a Redis restart lost this attempt's claim (Redis has it waiting,
        or not at all), the claim is reasserted and it is written: else the job would be sent
        again although it ran."""
        if await self.store.finish(job_id, link.name, held.attempt, state, entry, ledger):
            return True
        repaired = await self.store.reassert_held(
            job_id, link.name, held.attempt, held.record, held.started_at_ms
        )
        if repaired != 1:
            return False
        log.warning("job %s: its claim was lost by Redis, reasserted to record its end", job_id)
        return await self.store.finish(job_id, link.name, held.attempt, state, entry, ledger)

    async def requeue(
        self,
        link_name: str,
        job: JobRecord,
        *,
        failed: bool,
        outcome: str,
        link: WorkerLink | None,
        owner_lapsed: bool = False,
    ) -> int:
        """Back to the queue (or ended after too many failures); the old worker is forgotten.
        With `owner_lapsed`: a job of another node's worker, only while that node has lapsed."""
        message = f"gave up after {job.failures + 1} failed attempts (last: {outcome})"
        give_up = error_entry(job, self.store.now_ms(), message, "GatewayGaveUp")
        result = await self.store.requeue(
            job.job_id,
            link_name,
            job.attempt,
            failed=failed,
            outcome=outcome,
            give_up_entry=give_up,
            owner_lapsed=owner_lapsed,
        )
        if link is not None:
            self._forget(link, job.job_id)
        self._count_requeue(result, link_name, job, failed=failed, outcome=outcome, link=link)
        if result:
            log.info(
                "job %s %s from %s (attempt %d, %s)",
                job.job_id,
                "requeued" if result == 1 else "given up",
                link_name,
                job.attempt,
                outcome,
            )
        if result == 2 and job.client_id:
            error = give_up["status"]["messages"][-1][1]
            self.hub.publish(text_frame(job.client_id, EventKind.EXECUTION_ERROR, error))
        if result == 2:
            self.on_end(job.job_id)
            await self._done(job.client_id, job.job_id)
        self.wake()
        return result

    def _count_requeue(
        self,
        result: int,
        link_name: str,
        job: JobRecord,
        *,
        failed: bool,
        outcome: str,
        link: WorkerLink | None,
    ) -> None:
        """Requeued (1): a retry or a re-dispatch; given up (2): the job ended in error."""
        if result == 1:
            self.metrics.job_requeued(link_name, outcome, failed=failed)
        elif result == 2:
            self.metrics.job_ended(job, JobState.ERROR, link_name, _group(link, job))

    async def cancel(self, link: WorkerLink | None, job: JobRecord) -> bool:
        self.on_end(job.job_id)
        if link is not None:
            self._forget(link, job.job_id)
        ok = await self.store.cancel_held(job.job_id, job.worker or "", job.attempt)
        if ok:
            self.metrics.job_ended(job, JobState.CANCELLED, job.worker or "", _group(link, job))
        self.hub.queue_changed()
        return ok

    def _tell_end(self, client_id: str | None, entry: Mapping[str, Any]) -> None:
        """The worker's own terminal event, as its history entry kept it."""
        message = terminal_message(entry)
        if client_id and message is not None:
            self.hub.publish(text_frame(client_id, message[0], message[1]))

    def _forget(self, link: WorkerLink, job_id: str) -> None:
        link.release(job_id)
        self.hub.queue_changed()
        self.wake()

    async def _done(self, client_id: str | None, job_id: str) -> None:
        """The end of a prompt as ComfyUI sends it: the shorter queue, then `executing` null."""
        await self.hub.announce_queue()
        if client_id:
            data = {"node": None, "prompt_id": job_id}
            self.hub.publish(text_frame(client_id, EventKind.EXECUTING, data))


def terminal_message(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The last `execution_success` or `execution_error` among the entry's status messages."""
    status = entry.get("status")
    messages = status.get("messages") if isinstance(status, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if (
            isinstance(message, list | tuple)
            and len(message) == 2
            and message[0] in TERMINAL_KINDS
            and isinstance(message[1], dict)
        ):
            return str(message[0]), message[1]
    return None


def _ignore(job_id: str) -> None:
    pass


def _group(link: WorkerLink | None, job: JobRecord) -> str:
    return link.group if link is not None else job.placement.group or ""


def _learn(
    link: WorkerLink,
    job: JobRecord,
    held: Held,
    prompt: Mapping[str, Any],
    twins: Sequence[WorkerLink] = (),
) -> Finished | None:
    """What the job taught about the worker, and about its twins; never at the cost of the
    job's answer."""
    try:
        done = replace(finished(job.job_view(), prompt, held.clock), first_use=held.first_use)
        before = link.knowledge
        link.learn(done)
        for twin in twins:
            twin.learn_from_twin(before, done)
    except Exception:
        log.exception("learning from job %s on %s failed", job.job_id, link.name)
        return None
    return done


def _prompt_of(job: JobRecord) -> Mapping[str, Any]:
    try:
        prompt = json.loads(job.prompt_json)
    except ValueError:
        return {}
    return prompt if isinstance(prompt, dict) else {}
