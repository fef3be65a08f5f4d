"""`swarm_like`: SwarmUI's backend selection (BackendHandler.TryFind, LoadHighestPressureNow).

A free worker takes the oldest job whose model it holds (least busy worker first). Jobs no free
worker holds add to their model's pressure, `10 x waiting + seconds the oldest has waited`;
once a model's oldest job has waited `patience_s` (1.5 s in SwarmUI), the highest pressure is
served first: the longest-idle free worker that does not hold the model loads it (the oldest job
of that model goes there) and takes nothing else this round. SwarmUI knows no speeds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from gateway.scheduler.cost import (
    can_run,
    idle_order,
    is_warm,
    models_of,
    resident_after_queue,
    with_job,
)
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView

PATIENCE_S = 1.5
PRESSURE_PER_JOB = 10.0


def _warm_pass(snapshot: Snapshot, workers: dict[str, WorkerView]) -> list[Assignment]:
    """Every job that a free worker holding its model can take, oldest first."""
    out: list[Assignment] = []
    for job in snapshot.jobs:
        holders = [
            w
            for w in workers.values()
            if w.free_slots > 0 and can_run(job, w) and is_warm(job, resident_after_queue(w))
        ]
        if holders:
            worker = min(holders, key=lambda w: (w.outstanding, w.name))
            workers[worker.name] = with_job(worker, job)
            out.append(Assignment(job.job_id, worker.name))
    return out


def _pressures(jobs: list[JobView], now_s: float) -> list[list[JobView]]:
    """Waiting jobs by model, highest pressure first; each list oldest first."""
    by_model: dict[frozenset[str], list[JobView]] = defaultdict(list)
    for job in jobs:
        by_model[models_of(job)].append(job)

    def pressure(group: list[JobView]) -> float:
        oldest = min(job.enqueued_at_s for job in group)
        return PRESSURE_PER_JOB * len(group) + (now_s - oldest)

    return sorted(by_model.values(), key=pressure, reverse=True)


def _load_target(job: JobView, workers: dict[str, WorkerView]) -> WorkerView | None:
    targets = [
        w
        for w in workers.values()
        if w.free_slots > 0 and can_run(job, w) and not is_warm(job, resident_after_queue(w))
    ]
    return min(targets, key=idle_order) if targets else None


@dataclass(frozen=True)
class SwarmLikePolicy:
    patience_s: float = PATIENCE_S
    name: str = "swarm_like"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        workers = {worker.name: worker for worker in snapshot.workers}
        out = _warm_pass(snapshot, workers)
        taken = {a.job_id for a in out}
        waiting = [job for job in snapshot.jobs if job.job_id not in taken]
        for group in _pressures(waiting, snapshot.now_s):
            oldest = min(group, key=lambda job: job.enqueued_at_s)
            if snapshot.now_s - oldest.enqueued_at_s < self.patience_s:
                continue
            worker = _load_target(oldest, workers)
            if worker is not None:
                # The loading worker is reserved for the load: nothing else this round.
                workers[worker.name] = replace(with_job(worker, oldest), free_slots=0)
                out.append(Assignment(oldest.job_id, worker.name))
        return out


@register("swarm_like")
def make_swarm_like() -> Policy:
    return SwarmLikePolicy()
