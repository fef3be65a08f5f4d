"""The waiting queue as groups, kept in Redis so every node sees the same view.

Jobs that placement cannot tell apart (`queue.class_key`) form a group: one ZSET of their ids
with the queue score they have in `pending`, and their class key, summed work and summed
arrival times in hashes (`Keys.queue_index`). The Lua scripts that add a job to `pending` or
take one out update its group in the same step (`scripts._INDEX`), so reading the whole queue
costs one call whose size is the groups and the jobs shown of each, never the queue's length.

Each job hash carries what those scripts need (`queue_group`, `class_key`, `work_units`,
written at enqueue, see `queue_fields`), so no script parses placement JSON. Redis written by
an older gateway, or restored from an older copy, has jobs without them and no index:
`GroupIndex.ensure` notices at start and builds it once.

What a group shows of each of its first jobs (priority, arrival, number, work) is kept in one
more hash (`Keys.queue_jobs`), so a read costs a few small reads per group (its first jobs,
and its last one's arrival).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from gateway.jobs import lua as scripts
from gateway.jobs.keys import Keys
from gateway.jobs.models import Placement
from gateway.scheduler import queue
from gateway.scheduler.snapshot import JobGroup, JobView

log = logging.getLogger(__name__)

BATCH = 500
"""Jobs a rebuild handles per step (one script call, one pipeline)."""


def queue_fields(keys: Keys, placement: Placement) -> dict[str, str]:
    """The fields of a job hash that the index scripts read: its group's key, its class key
    and its work units, as `JobRecord.job_view` would see them."""
    # Through JSON, as every reader gets it back (work units of 0 read back as 1, for one).
    view = Placement.from_json(placement.to_json()).job_view("", enqueued_at_ms=0)
    key = queue.class_key(view)
    return {
        "queue_group": keys.queue_group(key),
        "class_key": key,
        "work_units": repr(view.work_units),
    }


class GroupIndex:
    """Reads the group index and builds it again when it is out of step with `pending`."""

    def __init__(self, redis: aioredis.Redis, keys: Keys):
        self.redis = redis
        self.keys = keys
        self._read = redis.register_script(scripts.QUEUE_GROUPS)
        self._counts = redis.register_script(scripts.INDEX_COUNTS)
        self._backfill = redis.register_script(scripts.BACKFILL)
        self._clear = redis.register_script(scripts.CLEAR_INDEX)
        self._index_jobs = redis.register_script(scripts.INDEX_JOBS)
        self._warned = False
        self._shown: dict[str, _Shown] = {}
        """The jobs the last read showed: a job still shown is not built again."""

    async def groups(self, head: int = queue.HEAD_JOBS) -> tuple[JobGroup, ...]:
        """Every waiting job, as `queue.group_jobs` of all of them would group it: the same
        groups in the same order, each with its first `head` jobs and the aggregates of all
        (work summed to a millionth of a unit). One script call."""
        if head < 1:
            raise ValueError("a group shows at least one job")
        keys = [self.keys.pending, *self.keys.queue_index]
        # One JSON text, not nested arrays: redis-py parses a reply element by element, in
        # Python, and a read shows thousands of jobs.
        reply = json.loads(await self._read(keys=keys, args=[head]))
        shown: dict[str, _Shown] = {}
        groups = [group for item in reply[1:] if (group := self._group(item, shown))]
        self._shown = shown
        self._check(int(reply[0]), sum(group.count for group in groups))
        return queue.ordered_groups(groups)

    async def waiting_by_class(self) -> list[tuple[JobView, int]]:
        """Each group's class (a job of it, as `queue.class_template`) and how many of its
        jobs wait: two small reads, whatever the queue's length; the dispatcher's view of the
        jobs shown is left alone."""
        classes = await self.redis.hgetall(self.keys.queue_classes)
        if not classes:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for group_key in classes:
                pipe.zcard(group_key)
            counts = await pipe.execute()
        templates = [queue.class_template(str(class_key)) for class_key in classes.values()]
        return [(job, int(n)) for job, n in zip(templates, counts, strict=True) if int(n)]

    def _group(self, item: Sequence[Any], shown: dict[str, _Shown]) -> JobGroup | None:
        """One group of a QUEUE_GROUPS reply; None when none of its jobs is left to show."""
        _, class_key, count, work_micro, arrivals_ms, ids, values, last = item
        template: JobView | None = None
        head: list[JobView] = []
        for job_id, value in zip(ids, values, strict=False):
            if not isinstance(value, str):
                continue  # a hand edit left its id behind
            seen = self._shown.get(job_id)
            if seen is None or seen.value != value or seen.class_key != class_key:
                template = template or queue.class_template(class_key)
                seen = _Shown(class_key, value, _view(template, job_id, value))
            shown[job_id] = seen
            head.append(seen.view)
        if not head:
            return None
        return JobGroup(
            key=class_key,
            head=tuple(head),
            count=int(count),
            work_units=int(work_micro) / 1e6,
            enqueued_s_sum=int(arrivals_ms) / 1000.0,
            oldest_s=min(job.enqueued_at_s for job in head),
            newest_s=_arrival_s(last) if isinstance(last, str) else head[-1].enqueued_at_s,
            top_priority=head[0].priority,
        )

    def _check(self, waiting: int, indexed: int) -> None:
        # Every script keeps the two in step, so a difference means something wrote `pending`
        # around them (an older node, a hand edit): warn once; a restart rebuilds.
        if waiting != indexed and not self._warned:
            log.warning("queue index out of step: %d waiting, %d indexed", waiting, indexed)
            self._warned = True

    async def in_step(self) -> bool:
        """Whether the index holds exactly as many jobs as `pending` (checked atomically)."""
        counts = await self._counts(keys=[self.keys.pending, *self.keys.queue_index])
        return len({int(n) for n in counts}) == 1

    async def ensure(self) -> bool:
        """Build the index again if it is out of step with `pending` (none yet, or written
        around); True when it was rebuilt. The check is one script call (a count per group)."""
        if await self.in_step():
            return False
        await self.rebuild()
        if not await self.in_step():
            # A job without group fields that was claimed and requeued while the rebuild ran
            # past it: its fields are there now.
            await self.rebuild()
        return True

    async def rebuild(self) -> int:
        """Build the index again from `pending`, a batch of jobs per step so Redis never
        stalls for long; jobs that arrive or leave meanwhile keep it right themselves. Fills
        in first the group fields of every waiting or held job that lacks them. Returns the
        waiting jobs left out (a record an older gateway wrote meanwhile)."""
        started_s = time.monotonic()
        filled = missing = 0
        # Held jobs first: one requeued from now on has its fields, so it indexes itself.
        async for ids in self._scan(self.keys.leases):
            filled += await self._fill_chunk(ids)
        await self._clear(keys=self.keys.queue_index)
        async for ids in self._scan(self.keys.pending):
            if lacking := await self._index_batch(ids):
                filled += await self._fill_chunk(lacking)
                missing += len(await self._index_batch(lacking))
        log.warning(
            "queue index rebuilt: %d waiting jobs, %d job records given group fields, "
            "%d left out, %.2f s",
            await self.redis.zcard(self.keys.pending),
            filled,
            missing,
            time.monotonic() - started_s,
        )
        self._warned = False
        return missing

    async def _index_batch(self, ids: Sequence[str]) -> list[str]:
        """Index those of `ids` that wait; the ids of those whose record lacks group fields."""
        keys = [self.keys.pending, *self.keys.queue_index]
        lacking = await self._index_jobs(keys=keys, args=[self.keys.job(""), *ids])
        return [str(job_id) for job_id in lacking]

    async def _scan(self, source: str) -> AsyncIterator[list[str]]:
        """The members of a ZSET in batches; each one there throughout comes at least once."""
        cursor = None
        while cursor != 0:
            cursor, pairs = await self.redis.zscan(source, cursor or 0, count=BATCH)
            if pairs:
                yield [str(member) for member, _ in pairs]

    async def _fill_chunk(self, ids: Sequence[str]) -> int:
        """Group fields for those of `ids` whose record lacks them; how many were written."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hmget(self.keys.job(job_id), ["queue_group", "placement"])
            rows = await pipe.execute()
        lacking = [(i, row[1]) for i, row in zip(ids, rows, strict=True) if row[0] is None]
        if not lacking:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, placement in lacking:
                fields = queue_fields(self.keys, Placement.from_json(placement))
                args = [part for pair in fields.items() for part in pair]
                await self._backfill(keys=[self.keys.job(job_id)], args=args, client=pipe)
            done = await pipe.execute()
        return sum(int(d) for d in done)


@dataclass(frozen=True)
class _Shown:
    class_key: str
    value: str
    """What the jobs hash said of it: priority, arrival, number and work."""
    view: JobView


def _arrival_s(value: str) -> float:
    """The arrival of a job, from what the jobs hash says of it (as `_view` reads it)."""
    return int(value.split(" ")[1] or 0) / 1000.0


def _view(template: JobView, job_id: str, value: str) -> JobView:
    """A shown job: its class's fields, and its own as `JobRecord.from_hash` reads them."""
    priority, enqueued_at_ms, number, work_units = value.split(" ")
    return JobView(
        job_id=job_id,
        enqueued_at_s=int(enqueued_at_ms or 0) / 1000.0,
        priority=int(priority or 0),
        model_keys=template.model_keys,
        checkpoint=template.checkpoint,
        family=template.family,
        work_units=float(work_units or 1.0),
        group=template.group,
        eligible=template.eligible,
        score=float(number),
    )
