"""A placement policy seen through the emulators' clock.

Emulated workers run `time_scale` times faster than the cards they model, so what the gateway
measures of them (speeds, load and run seconds, waits, arrival rates) is in wall seconds of a
faster world, while a policy's own constants (a hold time, an age scale, a demand horizon) are
in seconds of real cards. Converting the snapshot to emulated seconds makes a policy behave in
front of an emulated farm as in front of the cards it emulates (and as in the simulator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gateway.scheduler.policy import Policy
from gateway.scheduler.snapshot import Assignment, JobGroup, JobView, Snapshot, WorkerView


class EmulatedTime:
    """`inner`, given snapshots in emulated seconds (wall seconds / `time_scale`)."""

    def __init__(self, inner: Policy, time_scale: float):
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.inner = inner
        self.time_scale = time_scale

    @property
    def name(self) -> str:
        return self.inner.name

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return self.inner.assign(emulated(snapshot, 1.0 / self.time_scale))


def in_emulated_time(policy: Policy, time_scale: float) -> Policy:
    """The policy as is at time scale 1, else seeing emulated seconds."""
    return policy if time_scale == 1.0 else EmulatedTime(policy, time_scale)


MIN_WALL_S = 0.02
"""The shortest wall interval `wall_s` gives: a small time scale does not make the gateway
poll as fast as it can."""


def wall_s(card_s: float, time_scale: float) -> float:
    """Wall seconds that last `card_s` seconds of the cards an emulated farm models (time scale
    1: real cards), at least `MIN_WALL_S`."""
    return max(card_s * time_scale, MIN_WALL_S)


def emulated(snapshot: Snapshot, factor: float) -> Snapshot:
    """The snapshot with every duration and instant multiplied by `factor` (rates divided)."""
    return Snapshot(
        now_s=snapshot.now_s * factor,
        jobs=tuple(_job(job, factor) for job in snapshot.jobs),
        workers=tuple(_worker(worker, factor) for worker in snapshot.workers),
        demand_per_s=_times(snapshot.demand_per_s, 1.0 / factor),
        groups=tuple(_group(group, factor) for group in snapshot.groups),
    )


def _group(group: JobGroup, factor: float) -> JobGroup:
    return replace(
        group,
        head=tuple(_job(job, factor) for job in group.head),
        enqueued_s_sum=group.enqueued_s_sum * factor,
        oldest_s=group.oldest_s * factor,
        newest_s=group.newest_s * factor,
    )


def _job(job: JobView, factor: float) -> JobView:
    return replace(job, enqueued_at_s=job.enqueued_at_s * factor)


def _worker(worker: WorkerView, factor: float) -> WorkerView:
    idle = worker.idle_since_s
    return replace(
        worker,
        outstanding_s=worker.outstanding_s * factor,
        speed=_times(worker.speed, 1.0 / factor),
        load_s=_times(worker.load_s, factor),
        fixed_s=_times(worker.fixed_s, factor),
        idle_since_s=None if idle is None else idle * factor,
    )


def _times(values: Mapping[str, float], factor: float) -> dict[str, float]:
    return {key: value * factor for key, value in values.items()}
