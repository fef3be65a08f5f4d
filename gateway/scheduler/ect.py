"""`ect_greedy`: early binding to the worker with the least expected completion time.

Each job, in queue order, goes to the worker where it would finish soonest behind the work that
worker already holds (queued work and residency are carried forward job by job), ties to the
faster worker. This is what most LLM routers do; with unlimited slots it is pure early binding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.scheduler.cost import (
    can_run,
    completion_s,
    load_s,
    models_of,
    resident_after_queue,
    run_s,
)
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


def with_job(worker: WorkerView, job: JobView) -> WorkerView:
    """The worker as it will be once `job` is queued on it."""
    cost = load_s(job, worker, resident_after_queue(worker)) + run_s(job, worker)
    return replace(
        worker,
        free_slots=worker.free_slots - 1,
        outstanding=worker.outstanding + 1,
        outstanding_s=worker.outstanding_s + cost,
        queued=(*worker.queued, models_of(job)),
    )


def best_worker(job: JobView, workers: dict[str, WorkerView]) -> WorkerView | None:
    """The eligible worker with a free slot that would finish `job` first."""
    choices = [w for w in workers.values() if w.free_slots > 0 and can_run(job, w)]
    if not choices:
        return None
    return min(choices, key=lambda w: (completion_s(job, w), run_s(job, w), w.name))


@dataclass(frozen=True)
class EctGreedyPolicy:
    name: str = "ect_greedy"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        workers = {worker.name: worker for worker in snapshot.workers}
        out: list[Assignment] = []
        for job in snapshot.jobs:
            worker = best_worker(job, workers)
            if worker is not None:
                workers[worker.name] = with_job(worker, job)
                out.append(Assignment(job.job_id, worker.name))
        return out


@register("ect_greedy")
def make_ect_greedy() -> Policy:
    return EctGreedyPolicy()
