"""The job store: accepted prompts, the pending queue, claims with leases, history, in Redis.

Every transition is one atomic script (gateway.jobs.lua); transitions that concern an attempt
are fenced by it. Final writes are shielded from cancellation, so a cancelled request or a
stopping gateway never leaves a half-written result.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar, cast

import redis.asyncio as aioredis

from gateway.jobs import lua as scripts
from gateway.jobs.group_index import GroupIndex, queue_fields
from gateway.jobs.history import entry_client_id
from gateway.jobs.keys import Keys
from gateway.jobs.models import JobRecord, JobState, NewJob, display_number
from gateway.scheduler import queue
from gateway.scheduler.snapshot import JobGroup

T = TypeVar("T")
Arg = str | int | float
Clock = Callable[[], float]


class EnqueueStatus(IntEnum):
    CREATED = 0
    IDEMPOTENT_REPLAY = 1
    ID_IN_USE = 2
    IDEMPOTENCY_MISMATCH = 3


@dataclass(frozen=True)
class Enqueued:
    status: EnqueueStatus
    job_id: str
    number: float = 0.0


@dataclass(frozen=True)
class StoreLimits:
    max_failures: int = 3
    history_max_items: int = 10000
    job_ttl_s: float = 7 * 24 * 3600.0
    idempotency_ttl_s: float = 24 * 3600.0
    lease_s: float = 30.0


async def shielded(awaitable: Awaitable[T]) -> T:
    """Finish a write even if the caller is cancelled meanwhile."""
    return await asyncio.shield(asyncio.ensure_future(awaitable))


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class JobStore:
    """Redis-backed jobs. `clock` returns seconds since the epoch (wall time, shared by nodes)."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        limits: StoreLimits | None = None,
        clock: Clock = time.time,
    ):
        self.redis = redis
        self.keys = keys
        self.limits = limits or StoreLimits()
        self.clock = clock
        self._enqueue = redis.register_script(scripts.ENQUEUE)
        self._claim = redis.register_script(scripts.CLAIM)
        self._finish = redis.register_script(scripts.FINISH)
        self._requeue = redis.register_script(scripts.REQUEUE)
        self._take_over = redis.register_script(scripts.TAKE_OVER)
        self._start = redis.register_script(scripts.START)
        self._cancel_pending = redis.register_script(scripts.CANCEL_PENDING)
        self._cancel_held = redis.register_script(scripts.CANCEL_HELD)
        self._peek = redis.register_script(scripts.PEEK)
        self._reassert = redis.register_script(scripts.REASSERT)
        self._raise_counter = redis.register_script(scripts.RAISE_COUNTER)
        self.index = GroupIndex(redis, keys)
        """The waiting jobs as groups, kept by the scripts above."""

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _deadline_ms(self) -> int:
        return self.now_ms() + int(self.limits.lease_s * 1000)

    # -- accepting ---------------------------------------------------------------------------

    async def enqueue(
        self,
        job: NewJob,
        idempotency: tuple[str, str] | None = None,
        *,
        enqueued_at_ms: int | None = None,
    ) -> Enqueued:
        """Write the job and put it in the queue, atomically; `idempotency` = (key, digest)."""
        idem_key = self.keys.idempotency(idempotency[0]) if idempotency else ""
        idem_value = (
            json.dumps({"job_id": job.job_id, "sha256": idempotency[1]}) if idempotency else ""
        )
        args: list[Arg] = [
            job.job_id,
            "" if job.number is None else repr(job.number),
            "1" if job.front else "0",
            str(job.priority),
            str(int(self.limits.idempotency_ttl_s * 1000)),
            idem_value,
            *_job_fields(
                job, self.now_ms() if enqueued_at_ms is None else enqueued_at_ms, self.keys
            ),
        ]
        keys = [self.keys.job(job.job_id), self.keys.pending, self.keys.counter, idem_key]
        keys += self.keys.queue_index
        reply = await shielded(self._enqueue(keys=keys, args=args))
        return _enqueued(job.job_id, reply, idempotency)

    async def restore(
        self, job: NewJob, enqueued_at_ms: int, idempotency: tuple[str, str] | None
    ) -> bool:
        """Enqueue again a job a Redis restart lost (`job.number` as first numbered); False
        when its record exists. Its Idempotency-Key, if lost too, is written back after it."""
        result = await self.enqueue(job, enqueued_at_ms=enqueued_at_ms)
        if result.status is not EnqueueStatus.CREATED:
            return False
        if idempotency is not None:
            value = json.dumps({"job_id": job.job_id, "sha256": idempotency[1]})
            ttl_ms = int(self.limits.idempotency_ttl_s * 1000)
            await self.redis.set(self.keys.idempotency(idempotency[0]), value, px=ttl_ms, nx=True)
        return True

    async def raise_counter(self, floor: int) -> bool:
        """Make the next counted `number` at least `floor` (a restart may roll it back)."""
        return bool(await self._raise_counter(keys=[self.keys.counter], args=[floor]))

    async def run_id(self) -> str:
        """Redis' run id: a new one on every start of the server."""
        return str((await self.redis.info("server"))["run_id"])

    # -- dispatching -------------------------------------------------------------------------

    async def peek(self, limit: int) -> list[JobRecord]:
        """The first `limit` waiting jobs in queue order, with what placement needs."""
        flat = await self._peek(keys=[self.keys.pending], args=[limit, self.keys.job("")])
        out: list[JobRecord] = []
        for i in range(0, len(flat), 5):
            raw = {
                "state": "pending",
                "placement": flat[i + 1],
                "priority": flat[i + 2],
                "enqueued_at_ms": flat[i + 3],
                "number": flat[i + 4],
            }
            out.append(JobRecord.from_hash(flat[i], raw))
        return out

    async def queue_groups(self, head: int = queue.HEAD_JOBS) -> tuple[JobGroup, ...]:
        """The whole waiting queue as groups, each with its first `head` jobs: what
        `queue.group_jobs` of every waiting job would return, in one call that reads only the
        jobs shown."""
        return await self.index.groups(head)

    def _held_keys(self, job_id: str, worker: str) -> list[str]:
        """The keys a job held by `worker` spans (CLAIM and REASSERT take them in this order)."""
        return [
            self.keys.job(job_id),
            self.keys.pending,
            self.keys.leases,
            self.keys.worker_jobs(worker),
            self.keys.attempts(job_id),
        ]

    async def claim(
        self, job_id: str, worker: str, placement: Mapping[str, object] | None = None
    ) -> JobRecord | None:
        """Take a waiting job for `worker`: the claimed record (its new attempt), or None.
        `placement` (why the policy chose this worker) is kept in the attempt record."""
        keys = [*self._held_keys(job_id, worker), *self.keys.queue_index]
        why = json.dumps(placement) if placement else ""
        args: list[Arg] = [job_id, worker, self.now_ms(), self._deadline_ms(), why]
        reply = await shielded(self._claim(keys=keys, args=args))
        if not reply:
            return None
        return JobRecord.from_hash(job_id, dict(zip(reply[::2], reply[1::2], strict=True)))

    async def reassert_held(
        self,
        job_id: str,
        worker: str,
        attempt: int,
        record: JobRecord | None,
        started_at_ms: int | None,
    ) -> int:
        """Make Redis say that `worker` holds the job under `attempt`, with a lease (after a
        restart that lost writes); its record is recreated from `record` when missing.
        Returns 0 left alone (ended, superseded or requeued), 1 repaired, 2 already so."""
        keys = [*self._held_keys(job_id, worker), *self.keys.queue_index]
        before, _, after = self.keys.worker_jobs("\n").partition("\n")
        claimed_at_ms = record.claimed_at_ms if record and record.claimed_at_ms else self.now_ms()
        args: list[Arg] = [
            job_id,
            worker,
            attempt,
            "1" if started_at_ms is not None else "0",
            self.now_ms(),
            self._deadline_ms(),
            claimed_at_ms,
            "" if started_at_ms is None else started_at_ms,
            before,
            after,
            *(_record_fields(record, self.keys) if record is not None else []),
        ]
        return int(await shielded(self._reassert(keys=keys, args=args)))

    async def mark_started(self, job_id: str, attempt: int) -> bool:
        keys = [self.keys.job(job_id), self.keys.leases]
        args: list[Arg] = [job_id, attempt, self.now_ms(), self._deadline_ms()]
        return bool(await self._start(keys=keys, args=args))

    async def renew(self, job_ids: Iterable[str]) -> None:
        """Push the lease deadline of held jobs; finished jobs are not re-added (XX)."""
        ids = list(job_ids)
        if ids:
            deadline = self._deadline_ms()
            await self.redis.zadd(self.keys.leases, dict.fromkeys(ids, deadline), xx=True)

    async def expired(self, limit: int = 100) -> list[str]:
        """Held jobs whose lease ran out."""
        found = await self.redis.zrangebyscore(self.keys.leases, 0, self.now_ms(), 0, limit)
        return [str(job_id) for job_id in found]

    # -- finishing ---------------------------------------------------------------------------

    def _fenced_keys(self, job_id: str, worker: str) -> list[str]:
        return [
            *self._held_keys(job_id, worker),
            self.keys.history,
            self.keys.history_seq,
            self.keys.entry(job_id),
        ]

    async def finish(
        self,
        job_id: str,
        worker: str,
        attempt: int,
        state: JobState,
        entry: Mapping[str, Any],
        ledger: str = "",
    ) -> bool:
        """Record the terminal state and history entry of this attempt, with its phase
        ledger (JSON; kept with the job and in the latest ledgers); False when superseded."""
        args: list[Arg] = [
            job_id,
            attempt,
            state.value,
            json.dumps(entry),
            self.now_ms(),
            self.limits.history_max_items,
            int(self.limits.job_ttl_s * 1000),
            self.keys.entry(""),
            ledger,
        ]
        keys = [*self._fenced_keys(job_id, worker), self.keys.ledgers]
        return bool(await shielded(self._finish(keys=keys, args=args)))

    async def ledgers(self, limit: int) -> list[dict[str, Any]]:
        """The latest `limit` job ledgers, newest first."""
        raw = await self.redis.lrange(self.keys.ledgers, 0, max(limit, 1) - 1)
        return [json.loads(item) for item in raw]

    async def requeue(
        self,
        job_id: str,
        worker: str,
        attempt: int,
        *,
        failed: bool,
        outcome: str,
        give_up_entry: Mapping[str, Any],
        owner_lapsed: bool = False,
    ) -> int:
        """Back to the queue (1), or ended after too many failures (2); 0 when fenced off.
        With `owner_lapsed`, only while the node owning `worker` has lapsed (else 0)."""
        args: list[Arg] = [
            job_id,
            attempt,
            "1" if failed else "0",
            self.limits.max_failures,
            outcome,
            self.now_ms(),
            json.dumps(give_up_entry),
            self.limits.history_max_items,
            int(self.limits.job_ttl_s * 1000),
            self.keys.entry(""),
        ]
        keys = [*self._fenced_keys(job_id, worker), *self.keys.queue_index]
        if owner_lapsed:
            keys.append(self.keys.worker_nodes)
            args += [worker, self.keys.node("")]
            return int(await shielded(self._take_over(keys=keys, args=args)))
        return int(await shielded(self._requeue(keys=keys, args=args)))

    async def cancel_pending(self, job_id: str) -> bool:
        keys = [self.keys.job(job_id), self.keys.pending, *self.keys.queue_index]
        args: list[Arg] = [job_id, self.now_ms(), int(self.limits.job_ttl_s * 1000)]
        return bool(await shielded(self._cancel_pending(keys=keys, args=args)))

    async def cancel_held(self, job_id: str, worker: str, attempt: int) -> bool:
        keys = self._fenced_keys(job_id, worker)[:5]
        args: list[Arg] = [job_id, attempt, self.now_ms(), int(self.limits.job_ttl_s * 1000)]
        return bool(await shielded(self._cancel_held(keys=keys, args=args)))

    # -- reading -----------------------------------------------------------------------------

    async def get(self, job_id: str) -> JobRecord | None:
        raw = cast(dict[str, str], await self.redis.hgetall(self.keys.job(job_id)))
        return JobRecord.from_hash(job_id, raw) if raw else None

    async def get_many(self, job_ids: Iterable[str]) -> list[JobRecord]:
        ids = list(job_ids)
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(self.keys.job(job_id))
            raws = await pipe.execute()
        return [JobRecord.from_hash(i, raw) for i, raw in zip(ids, raws, strict=True) if raw]

    async def attempts(self, job_id: str) -> list[dict[str, Any]]:
        raw = await self.redis.lrange(self.keys.attempts(job_id), 0, -1)
        return [json.loads(item) for item in raw]

    async def queue_remaining(self) -> int:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.pending)
            pipe.zcard(self.keys.leases)
            pending, held = await pipe.execute()
        return int(pending) + int(held)

    async def pending_ids(self) -> list[str]:
        return [str(i) for i in await self.redis.zrange(self.keys.pending, 0, -1)]

    async def held_ids(self) -> list[str]:
        return [str(i) for i in await self.redis.zrange(self.keys.leases, 0, -1)]

    async def queued_ids(self) -> list[str]:
        """The ids of every pending and every held job, each once. The pending ones are read
        first: a job claimed between the two reads is then in both, where read the other way
        round it was in neither. (Not one transaction: a full Redis refuses MULTI, and the
        queue must still be read then.)"""
        pending = await self.redis.zrange(self.keys.pending, 0, -1)
        held = await self.redis.zrange(self.keys.leases, 0, -1)
        return list(dict.fromkeys(str(i) for i in (*held, *pending)))

    async def worker_job_ids(self, worker: str) -> set[str]:
        return {str(i) for i in await self.redis.smembers(self.keys.worker_jobs(worker))}

    async def entry(self, job_id: str) -> str | None:
        value = await self.redis.get(self.keys.entry(job_id))
        return None if value is None else str(value)

    async def history_ids(self, start: int, stop: int) -> list[str]:
        return [str(i) for i in await self.redis.zrange(self.keys.history, start, stop)]

    async def history_count(self) -> int:
        return int(await self.redis.zcard(self.keys.history))

    async def entries(self, job_ids: list[str]) -> list[str | None]:
        if not job_ids:
            return []
        values = await self.redis.mget([self.keys.entry(i) for i in job_ids])
        return [None if v is None else str(v) for v in values]

    async def delete_history(self, job_ids: Iterable[str]) -> None:
        ids = list(job_ids)
        if ids:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.zrem(self.keys.history, *ids)
                pipe.delete(*[self.keys.entry(i) for i in ids])
                await pipe.execute()

    async def history_of_clients(self, client_ids: Collection[str]) -> list[str]:
        """The ids of the history entries whose prompts these clients sent."""
        ids = await self.history_ids(0, -1)
        entries = await self.entries(ids)
        return [
            job_id
            for job_id, entry in zip(ids, entries, strict=True)
            if entry is not None and entry_client_id(entry) in client_ids
        ]

    async def clear_history(self) -> None:
        await self.delete_history(await self.history_ids(0, -1))


def _job_fields(job: NewJob, now_ms: int, keys: Keys) -> list[str]:
    fields = {
        "id": job.job_id,
        "priority": str(job.priority),
        "client_id": job.client_id or "",
        "prompt": json.dumps(job.prompt),
        "extra_data": json.dumps(job.extra_data),
        "outputs": json.dumps(list(job.outputs)),
        "placement": job.placement.to_json(),
        "enqueued_at_ms": str(now_ms),
        "attempt": "0",
        "failures": "0",
        **queue_fields(keys, job.placement),
    }
    if job.targets is not None:
        fields["targets"] = json.dumps(list(job.targets))
    return [part for pair in fields.items() for part in pair]


def _record_fields(record: JobRecord, keys: Keys) -> list[str]:
    """The fields of a job hash that ENQUEUE wrote, from a claimed record."""
    fields = {
        "id": record.job_id,
        "number": repr(display_number(record.number)),
        "score": repr(record.score),
        "priority": str(record.priority),
        "client_id": record.client_id or "",
        "prompt": record.prompt_json,
        "extra_data": record.extra_json,
        "outputs": record.outputs_json,
        "placement": record.placement.to_json(),
        "enqueued_at_ms": str(record.enqueued_at_ms),
        "failures": str(record.failures),
        **queue_fields(keys, record.placement),
    }
    if record.targets_json is not None:
        fields["targets"] = record.targets_json
    return [part for pair in fields.items() for part in pair]


def _enqueued(job_id: str, reply: list[Any], idempotency: tuple[str, str] | None) -> Enqueued:
    kind = str(reply[0])
    if kind == "ok":
        return Enqueued(EnqueueStatus.CREATED, job_id, float(reply[1]))
    if kind == "exists":
        return Enqueued(EnqueueStatus.ID_IN_USE, job_id)
    previous = json.loads(reply[1])
    same = idempotency is not None and previous.get("sha256") == idempotency[1]
    status = EnqueueStatus.IDEMPOTENT_REPLAY if same else EnqueueStatus.IDEMPOTENCY_MISMATCH
    return Enqueued(status, str(previous["job_id"]))
