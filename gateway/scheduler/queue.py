"""The waiting queue as a policy sees it: a few groups of interchangeable jobs.

Jobs that need the same model keys and family, pin the same A/B group and may run on the same
workers are interchangeable to placement apart from their size, priority and age. One
`JobGroup` holds them all: the aggregates a policy needs (count, summed work, summed arrival
times, oldest arrival, top priority) and its first jobs in queue order. 100,000 waiting jobs
over 50 checkpoints are 50 groups, so a decision costs workers x groups, not workers x jobs.

`QueueIndex` keeps the groups incrementally as jobs arrive and leave, in memory (the
simulator, and the reference the Redis index in `gateway.jobs.group_index` is tested against).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.scheduler.snapshot import JobGroup, JobView, Snapshot, WorkerView

HEAD_JOBS = 64
"""Jobs of each group shown one by one (the first in queue order); the rest count in the
group's aggregates only."""


def class_key(job: JobView) -> str:
    """What makes two waiting jobs interchangeable to placement, as one string."""
    eligible = None if job.eligible is None else sorted(job.eligible)
    return json.dumps(
        [sorted(job.model_keys), job.checkpoint, job.family, job.group, eligible],
        separators=(",", ":"),
    )


def class_template(key: str) -> JobView:
    """A job of the class `key` names (its model keys, checkpoint, family, group and eligible
    workers), the rest left at defaults: `class_key(class_template(key)) == key`."""
    model_keys, checkpoint, family, group, eligible = json.loads(key)
    return JobView(
        job_id="",
        enqueued_at_s=0.0,
        model_keys=frozenset(model_keys),
        checkpoint=checkpoint,
        family=family,
        group=group,
        eligible=None if eligible is None else frozenset(eligible),
    )


def queue_order(job: JobView) -> tuple[int, float, str]:
    """Higher priority first, then the queue score (arrival), then the id."""
    return (-job.priority, job.score, job.job_id)


def group_of(jobs: Sequence[JobView], head: int = HEAD_JOBS) -> JobGroup:
    """One group of interchangeable jobs, given all of them in queue order."""
    shown = tuple(jobs[:head])
    return JobGroup(
        key=class_key(jobs[0]),
        head=shown,
        count=len(jobs),
        work_units=sum(job.work_units for job in jobs),
        enqueued_s_sum=sum(job.enqueued_at_s for job in jobs),
        # Among the head, as `JobGroup.oldest_s` promises and `QueueIndex` and the Redis index
        # keep it: an arrival deeper in the group would need an index by arrival too.
        oldest_s=min(job.enqueued_at_s for job in shown),
        newest_s=jobs[-1].enqueued_at_s,
        top_priority=max(job.priority for job in jobs),
    )


def ordered_groups(groups: Iterable[JobGroup]) -> tuple[JobGroup, ...]:
    """Groups in the order of their first jobs (the queue order of the heads)."""
    return tuple(sorted(groups, key=lambda group: queue_order(group.first)))


def group_jobs(jobs: Iterable[JobView], head: int = HEAD_JOBS) -> tuple[JobGroup, ...]:
    """The waiting jobs as groups (any order in, queue order within each group out)."""
    by_key: dict[str, list[JobView]] = {}
    for job in sorted(jobs, key=queue_order):
        by_key.setdefault(class_key(job), []).append(job)
    return ordered_groups(group_of(members, head) for members in by_key.values())


def groups_of(snapshot: Snapshot) -> tuple[JobGroup, ...]:
    """The snapshot's queue as groups: those it carries, else those of its jobs."""
    return snapshot.groups if snapshot.groups else group_jobs(snapshot.jobs)


def snapshot_of(
    now_s: float,
    groups: tuple[JobGroup, ...],
    workers: tuple[WorkerView, ...],
    demand_per_s: Mapping[str, float],
) -> Snapshot:
    """What a policy sees, built one way for the dispatcher and the simulator alike: the
    whole queue as groups, and each group's head as the jobs a one-at-a-time policy walks."""
    return Snapshot(
        now_s=now_s,
        jobs=heads_in_order(groups),
        workers=workers,
        demand_per_s=demand_per_s,
        groups=groups,
    )


def heads_in_order(groups: Iterable[JobGroup]) -> tuple[JobView, ...]:
    """Every job shown in some group's head, in queue order (what a one-job-at-a-time
    policy walks)."""
    return tuple(sorted((job for group in groups for job in group.head), key=queue_order))


@dataclass
class _Members:
    order: list[tuple[int, float, str]] = field(default_factory=list)
    jobs: dict[str, JobView] = field(default_factory=dict)
    work_units: float = 0.0
    enqueued_s_sum: float = 0.0


class QueueIndex:
    """The waiting jobs grouped, kept up to date job by job: `add` on arrival, `remove` when
    a job is claimed or cancelled; `groups` is what the policy sees."""

    def __init__(self, head: int = HEAD_JOBS):
        self.head = head
        self._groups: dict[str, _Members] = {}
        self._key_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._key_of)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._key_of

    def add(self, job: JobView) -> None:
        if job.job_id in self._key_of:
            return
        key = class_key(job)
        members = self._groups.setdefault(key, _Members())
        bisect.insort(members.order, queue_order(job))
        members.jobs[job.job_id] = job
        members.work_units += job.work_units
        members.enqueued_s_sum += job.enqueued_at_s
        self._key_of[job.job_id] = key

    def remove(self, job_id: str) -> JobView | None:
        key = self._key_of.pop(job_id, None)
        if key is None:
            return None
        members = self._groups[key]
        job = members.jobs.pop(job_id)
        order = queue_order(job)
        members.order.pop(bisect.bisect_left(members.order, order))
        if not members.jobs:
            del self._groups[key]
            return job
        members.work_units -= job.work_units
        members.enqueued_s_sum -= job.enqueued_at_s
        return job

    def get(self, job_id: str) -> JobView | None:
        key = self._key_of.get(job_id)
        return None if key is None else self._groups[key].jobs[job_id]

    def groups(self) -> tuple[JobGroup, ...]:
        return ordered_groups(self._group(key, members) for key, members in self._groups.items())

    def _group(self, key: str, members: _Members) -> JobGroup:
        head = tuple(members.jobs[job_id] for _, _, job_id in members.order[: self.head])
        return JobGroup(
            key=key,
            head=head,
            count=len(members.jobs),
            work_units=members.work_units,
            enqueued_s_sum=members.enqueued_s_sum,
            oldest_s=min(job.enqueued_at_s for job in head),
            newest_s=members.jobs[members.order[-1][2]].enqueued_at_s,
            top_priority=-members.order[0][0],
        )
