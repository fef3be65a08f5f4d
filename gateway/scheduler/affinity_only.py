"""`affinity_only`: a job waits for a worker that holds its model, whatever the wait.

A job whose model some worker holds goes only to such a worker (the least busy free one) and
waits while they are all busy; a job whose model nobody holds goes to any free worker, the
longest idle first, which then holds that model. No speeds, no load costs, no fairness: the
baseline that shows the hot-spot collapse of affinity without load awareness.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.scheduler.cost import can_run, is_warm, models_of, resident_after_queue
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


def _take(worker: WorkerView, job: JobView) -> WorkerView:
    return replace(
        worker,
        free_slots=worker.free_slots - 1,
        outstanding=worker.outstanding + 1,
        queued=(*worker.queued, models_of(job)),
    )


def _order(worker: WorkerView) -> tuple[int, float, str]:
    idle_since = worker.idle_since_s if worker.idle_since_s is not None else float("inf")
    return (worker.outstanding, idle_since, worker.name)


def choose(job: JobView, workers: dict[str, WorkerView]) -> WorkerView | None:
    """A free holder of the job's model; if nobody holds it, any free worker; else None."""
    eligible = [w for w in workers.values() if can_run(job, w)]
    holders = [w for w in eligible if is_warm(job, resident_after_queue(w))]
    candidates = [w for w in holders or eligible if w.free_slots > 0]
    return min(candidates, key=_order) if candidates else None


@dataclass(frozen=True)
class AffinityOnlyPolicy:
    name: str = "affinity_only"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        workers = {worker.name: worker for worker in snapshot.workers}
        out: list[Assignment] = []
        for job in snapshot.jobs:
            worker = choose(job, workers)
            if worker is not None:
                workers[worker.name] = _take(worker, job)
                out.append(Assignment(job.job_id, worker.name))
        return out


@register("affinity_only")
def make_affinity_only() -> Policy:
    return AffinityOnlyPolicy()
