"""`ect_greedy`: early binding to the worker with the least expected completion time.

Each job, in queue order, goes to the worker where it would finish soonest behind the work that
worker already holds (queued work and residency are carried forward job by job), ties to the
faster worker. This is what most LLM routers do; with unlimited slots it is pure early binding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.scheduler.cost import (
    can_run,
    completion_s,
    run_s,
)
from gateway.scheduler.policy import Policy, in_queue_order, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


def best_worker(job: JobView, workers: Mapping[str, WorkerView]) -> WorkerView | None:
    """The eligible worker with a free slot that would finish `job` first."""
    choices = [w for w in workers.values() if w.free_slots > 0 and can_run(job, w)]
    if not choices:
        return None
    return min(choices, key=lambda w: (completion_s(job, w), run_s(job, w), w.name))


@dataclass(frozen=True)
class EctGreedyPolicy:
    name: str = "ect_greedy"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return in_queue_order(snapshot, best_worker)


@register("ect_greedy", early=True)
def make_ect_greedy() -> Policy:
    return EctGreedyPolicy()
