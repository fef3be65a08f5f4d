"""What one call of the `affinity` policy tracks while it assigns: the queues and the lanes.

Both change as jobs are placed: a queue loses its first job, the worker that takes it is seen
with the job queued (`lanes.advance`), holding its models from then on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gateway.scheduler.affinity.lanes import Lane
from gateway.scheduler.cost import DEFAULT_SPEED, can_run, is_warm, models_of, speed_of
from gateway.scheduler.snapshot import JobGroup, JobView, Snapshot


@dataclass
class Queue:
    """The jobs of one group still waiting in this call, with its aggregates."""

    head: tuple[JobView, ...]
    """The group's head as the call began; those before `taken` are placed."""
    count: int
    work_units: float
    enqueued_s_sum: float
    models: frozenset[str]
    newest_s: float
    """The group's `newest_s` as the call began."""
    taken: int = 0

    @classmethod
    def of(cls, group: JobGroup) -> Queue:
        first = group.head[0]
        return cls(
            group.head,
            group.count,
            group.work_units,
            group.enqueued_s_sum,
            models_of(first),
            group.newest_s,
        )

    @property
    def has_jobs(self) -> bool:
        """Whether a job of its head is still waiting (the rest of the group is not shown)."""
        return self.taken < len(self.head)

    @property
    def first(self) -> JobView:
        return self.head[self.taken]

    def waited_s(self, now_s: float) -> float:
        """Seconds its remaining jobs have waited, summed."""
        return max(self.count * now_s - self.enqueued_s_sum, 0.0)

    def take(self, behind: int = 0) -> JobView:
        """Its next job, or the one `behind` places behind it."""
        at = self.taken + behind
        job = self.head[at]
        if behind:
            self.head = self.head[:at] + self.head[at + 1 :]
        else:
            self.taken += 1
        self.count -= 1
        self.work_units -= job.work_units
        self.enqueued_s_sum -= job.enqueued_at_s
        return job


_NONE: set[str] = set()
"""What `Farm.holding_of` gives for a key no lane holds (never changed)."""


@dataclass
class Farm:
    """The lanes, which of them hold which model keys, and the fastest speed per family."""

    now_s: float
    lanes: dict[str, Lane]
    holding: dict[str, set[str]] = field(default_factory=dict)
    """Model key -> names of the lanes that will hold it (`holding_of`)."""
    fastest: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    """Family -> the two best speeds of any worker (work units per second) and whose."""
    top_advantage: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Family -> the best speed and the highest comparative advantage of any worker (the
    fastest's over the second, at least 1), for `choice.queue_bound`."""
    _rates: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    _advantages: dict[tuple[str, str], float] = field(default_factory=dict)
    """Both per (lane, family), looked up once per call: a lane's worker and the fastest
    speeds do not change while the policy assigns."""

    @classmethod
    def of(cls, snapshot: Snapshot, lanes: Mapping[str, Lane], families: Iterable[str]) -> Farm:
        farm = cls(snapshot.now_s, dict(lanes))
        holding = farm.holding
        for name, lane in lanes.items():
            for key in lane.resident:
                names = holding.get(key)
                if names is None:
                    holding[key] = {name}
                else:
                    names.add(name)
        for family in set(families):
            speeds = [(speed_of(lane.worker, family), name) for name, lane in lanes.items()]
            top = farm.fastest[family] = sorted(speeds, reverse=True)[:2]
            second = top[1][0] if len(top) > 1 else 0.0
            advantage = top[0][0] / second if second > 0.0 else 1.0
            farm.top_advantage[family] = (top[0][0] if top else 0.0, max(advantage, 1.0))
        return farm

    def rate(self, lane: Lane, family: str) -> tuple[float, float]:
        """The lane's (work units per second, fixed seconds per job) for the family, looked up
        once per call (a lane's worker does not change while the policy assigns)."""
        key = (lane.name, family)
        rate = self._rates.get(key)
        if rate is None:
            rate = (speed_of(lane.worker, family), lane.worker.fixed_s.get(family, 0.0))
            self._rates[key] = rate
        return rate

    def speed(self, lane: Lane, family: str) -> float:
        return self.rate(lane, family)[0]

    def run_s(self, lane: Lane, job: JobView) -> float:
        """Warm seconds of `job` on the lane (as `cost.run_s`)."""
        speed, fixed_s = self.rate(lane, job.family)
        return fixed_s + job.work_units / speed

    def best_speed(self, family: str) -> float:
        """The fastest worker's speed for the family."""
        top = self.fastest.get(family)
        return top[0][0] if top else DEFAULT_SPEED

    def fastest_run_s(self, job: JobView) -> float:
        """Warm seconds of `job` on the fastest worker for its family."""
        top = self.fastest.get(job.family)
        if not top:
            return 0.0
        return self.run_s(self.lanes[top[0][1]], job)

    def advantage(self, lane: Lane, family: str) -> float:
        """How many times faster the lane runs the family than the fastest other worker (1
        alone): each card favours the work it is relatively best at."""
        key = (lane.name, family)
        found = self._advantages.get(key)
        if found is None:
            others = [speed for speed, name in self.fastest.get(family, ()) if name != lane.name]
            mine = self.speed(lane, family)
            found = mine / others[0] if others and others[0] > 0 else 1.0
            self._advantages[key] = found
        return found

    def holding_of(self, key: str) -> set[str]:
        """Names of the lanes that will hold `key` (the set itself: not to be changed)."""
        return self.holding.get(key, _NONE)

    def replace(self, lane: Lane) -> None:
        """Put the lane's new state in (after a job was placed on it)."""
        for key in self.lanes[lane.name].resident:
            self.holding[key].discard(lane.name)
        self.lanes[lane.name] = lane
        for key in lane.resident:
            self.holding.setdefault(key, set()).add(lane.name)

    def holders(self, queue: Queue, but: str) -> list[Lane]:
        """The lanes other than `but` that hold the queue's models and may run its jobs."""
        keys = iter(queue.models)
        first = next(keys, None)
        if first is None:
            return []
        names: Iterable[str] = self.holding_of(first)
        for key in keys:
            names = set(names) & self.holding_of(key)
        job = queue.first
        return [
            lane
            for name in names
            if name != but and can_run(job, (lane := self.lanes[name]).worker)
        ]

    def held_elsewhere(self, key: str, but: str) -> bool:
        names = self.holding_of(key)
        if not names:
            return False
        return len(names) > 1 or but not in names

    def is_warm(self, lane: Lane, queue: Queue) -> bool:
        return is_warm(queue.first, lane.resident)
