"""What one call of the `affinity` policy knows: the lanes, the queues, and derived views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, is_warm, models_of, run_s
from gateway.scheduler.lanes import Lane
from gateway.scheduler.snapshot import JobView, Snapshot

Groups = Mapping[frozenset[str], Sequence[JobView]]


@dataclass(frozen=True)
class Context:
    snapshot: Snapshot
    lanes: Mapping[str, Lane]
    tuning: Tuning
    needed: frozenset[str]
    """Model keys some waiting job needs."""
    warm_work: frozenset[str]
    """Workers for which some waiting job is warm (they have their own work to do)."""
    backlog_s: float
    """Seconds of work per worker (`backlog_s`)."""
    warm_load: Mapping[str, Mapping[frozenset[str], float]]
    """Seconds of warm waiting work per worker and model (`warm_loads`)."""
    small_share: float = 0.0
    """Share of the waiting jobs in small queues of models no worker holds (`small_share`)."""

    @property
    def now_s(self) -> float:
        return self.snapshot.now_s

    def others(self, lane: Lane, job: JobView) -> list[Lane]:
        """The other workers eligible for `job`."""
        return [o for o in self.lanes.values() if o.name != lane.name and can_run(job, o.worker)]


def context(
    snapshot: Snapshot, lanes: Mapping[str, Lane], groups: Groups, tuning: Tuning
) -> Context:
    warm_work = frozenset(
        lane.name
        for lane in lanes.values()
        if any(jobs and is_warm(jobs[0], lane.resident) for jobs in groups.values())
    )
    return Context(
        snapshot=snapshot,
        lanes=lanes,
        tuning=tuning,
        needed=frozenset(key for models in groups for key in models),
        warm_work=warm_work,
        backlog_s=backlog_s(snapshot),
        warm_load=warm_loads(lanes, groups),
        small_share=small_share(lanes, groups, tuning.hold_jobs),
    )


def small_share(lanes: Mapping[str, Lane], groups: Groups, hold_jobs: int) -> float:
    """Share of the waiting jobs in queues of fewer than `hold_jobs` jobs for models no worker
    holds: the jobs the hold would defer."""
    total = sum(len(jobs) for jobs in groups.values())
    if not total:
        return 0.0
    small = sum(
        len(jobs)
        for jobs in groups.values()
        if jobs
        and len(jobs) < hold_jobs
        and not any(is_warm(jobs[0], lane.resident) for lane in lanes.values())
    )
    return small / total


def groups_of(jobs: Sequence[JobView]) -> dict[frozenset[str], list[JobView]]:
    """Waiting jobs by the model keys they need, each list in queue order."""
    groups: dict[frozenset[str], list[JobView]] = {}
    for job in jobs:
        groups.setdefault(models_of(job), []).append(job)
    return groups


def backlog_s(snapshot: Snapshot) -> float:
    """Seconds of work per worker: what each holds, plus each waiting job on its fastest card."""
    if not snapshot.workers:
        return 0.0
    held = sum(max(w.outstanding_s, 0.0) for w in snapshot.workers)
    waiting = sum(
        min((run_s(job, w) for w in snapshot.workers if can_run(job, w)), default=0.0)
        for job in snapshot.jobs
    )
    return (held + waiting) / len(snapshot.workers)


def warm_loads(lanes: Mapping[str, Lane], groups: Groups) -> dict[str, dict[frozenset[str], float]]:
    """Seconds of warm waiting work per worker and model, each queue split evenly among the
    workers holding its model."""
    out: dict[str, dict[frozenset[str], float]] = {name: {} for name in lanes}
    for key, jobs in groups.items():
        warm = [lane for lane in lanes.values() if jobs and is_warm(jobs[0], lane.resident)]
        for lane in warm:
            mine = sum(run_s(job, lane.worker) for job in jobs if can_run(job, lane.worker))
            out[lane.name][key] = mine / len(warm)
    return out


def holders_of(lane: Lane, job: JobView, ctx: Context) -> list[Lane]:
    """The other workers holding `job`'s models, each from when it will have done its share of
    the other warm work waiting for it (a worker holding many models serves many queues)."""
    key = models_of(job)
    return [
        replace(other, ready_s=other.ready_s + _other_warm_s(other.name, key, ctx))
        for other in ctx.others(lane, job)
        if is_warm(job, other.resident)
    ]


def _other_warm_s(name: str, key: frozenset[str], ctx: Context) -> float:
    return sum(seconds for k, seconds in ctx.warm_load.get(name, {}).items() if k != key)
