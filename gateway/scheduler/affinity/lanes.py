"""A worker's plan while a policy assigns: when it will be free and what it will hold then.

A policy that places several jobs in one call (a burst, a prefetch slot) advances the lane of
each worker it gives a job to, so later choices see the earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.scheduler.cost import load_s, models_of, resident_after_queue, run_s, touch
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView


@dataclass(frozen=True)
class Lane:
    worker: WorkerView
    ready_s: float
    """Absolute time at which it will have finished everything planned for it."""
    resident: tuple[str, ...]
    """Model keys it will hold then, most recently used first."""
    slots: int
    """Jobs it may still take in this call."""

    @property
    def name(self) -> str:
        return self.worker.name


def lanes_of(snapshot: Snapshot) -> dict[str, Lane]:
    """One lane per worker, as the snapshot describes it."""
    return {
        worker.name: Lane(
            worker=worker,
            ready_s=snapshot.now_s + max(worker.outstanding_s, 0.0),
            resident=resident_after_queue(worker),
            slots=max(worker.free_slots, 0),
        )
        for worker in snapshot.workers
    }


def cost_on(lane: Lane, job: JobView) -> float:
    """Seconds the job adds to the lane: loads of what it will not hold, then the warm run."""
    return load_s(job, lane.worker, lane.resident) + run_s(job, lane.worker)


def advance(lane: Lane, job: JobView) -> Lane:
    """The lane once `job` is placed on it."""
    return replace(
        lane,
        ready_s=lane.ready_s + cost_on(lane, job),
        resident=touch(lane.resident, models_of(job), lane.worker.cache_slots),
        slots=lane.slots - 1,
    )


def mean_speed(worker: WorkerView) -> float:
    """Mean of the worker's measured speeds (0 if none): a tie-break toward faster cards."""
    speeds = list(worker.speed.values())
    return sum(speeds) / len(speeds) if speeds else 0.0
