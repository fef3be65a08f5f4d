"""`affinity_only`: a job waits for a worker that holds its model, whatever the wait.

A job whose model some worker holds goes only to such a worker (the least busy free one) and
waits while they are all busy; a job whose model nobody holds goes to any free worker, the
longest idle first, which then holds that model. No speeds, no load costs, no fairness: the
baseline that shows the hot-spot collapse of affinity without load awareness.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.scheduler.cost import can_run, idle_order, is_warm, resident_after_queue
from gateway.scheduler.policy import Policy, in_queue_order, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


def choose(job: JobView, workers: Mapping[str, WorkerView]) -> WorkerView | None:
    """A free holder of the job's model; if nobody holds it, any free worker; else None."""
    eligible = [w for w in workers.values() if can_run(job, w)]
    holders = [w for w in eligible if is_warm(job, resident_after_queue(w))]
    candidates = [w for w in holders or eligible if w.free_slots > 0]
    return min(candidates, key=idle_order) if candidates else None


@dataclass(frozen=True)
class AffinityOnlyPolicy:
    name: str = "affinity_only"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return in_queue_order(snapshot, choose)


@register("affinity_only")
def make_affinity_only() -> Policy:
    return AffinityOnlyPolicy()
