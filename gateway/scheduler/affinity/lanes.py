"""A worker's plan while a policy assigns: when it will be free and what it will hold then.

A policy that places several jobs in one call (a burst, a prefetch slot) advances the lane of
each worker it gives a job to, so later choices see the earlier ones.
"""

from __future__ import annotations

from typing import NamedTuple

from gateway.scheduler.cost import load_s, models_of, resident_after_queue, run_s, touch
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView


class Lane(NamedTuple):
    """Immutable like a frozen dataclass; a named tuple because a call builds one per worker
    and one per placement, and a tuple is built in half the time."""

    name: str
    """The worker's."""
    worker: WorkerView
    ready_s: float
    """Absolute time at which it will have finished everything planned for it."""
    resident: tuple[str, ...]
    """Model keys it will hold then, most recently used first."""
    slots: int
    """Jobs it may still take in this call."""


def lanes_of(snapshot: Snapshot) -> dict[str, Lane]:
    """One lane per worker, as the snapshot describes it."""
    now_s = snapshot.now_s
    return {
        worker.name: Lane(
            worker.name,
            worker,
            now_s + max(worker.outstanding_s, 0.0),
            resident_after_queue(worker) if worker.queued else worker.resident,
            max(worker.free_slots, 0),
        )
        for worker in snapshot.workers
    }


def cost_on(lane: Lane, job: JobView) -> float:
    """Seconds the job adds to the lane: loads of what it will not hold, then the warm run."""
    return load_s(job, lane.worker, lane.resident) + run_s(job, lane.worker)


def advance(lane: Lane, job: JobView) -> Lane:
    """The lane once `job` is placed on it."""
    return lane._replace(
        ready_s=lane.ready_s + cost_on(lane, job),
        resident=touch(lane.resident, models_of(job), lane.worker.cache_slots),
        slots=lane.slots - 1,
    )


def mean_speed(worker: WorkerView) -> float:
    """Mean of the worker's measured speeds (0 if none): a tie-break toward faster cards."""
    speeds = list(worker.speed.values())
    return sum(speeds) / len(speeds) if speeds else 0.0
