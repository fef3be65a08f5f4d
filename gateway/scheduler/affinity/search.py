"""How `affinity` makes a decision cheaply: the same choices as evaluating every lane against
every queue at every step (`place(..., prune=False)`), at a cost close to what changes.

- The queues the lane holds are found through an index by model key. The others are visited
  in the order of `Option.key` bounded over every lane, kept in order as queues lose jobs and
  holders change: those no worker holds by their ratio bound (`choice.queue_bound`), then the
  others by the bound on any helper's gain (`choice.holders_finish_s`: no help makes a queue
  done before now), until none can beat the best option so far; one no worker holds is
  evaluated only when its ratio bound for this lane (`choice.ratio_bound`) could beat it too.
  The ratio bounds assume what the rules never produce otherwise: load, reload and fixed
  seconds are never negative.
- Options, bounds and per-lane costs are kept across the assignments of one call, each
  stamped with the versions of the lane and the queue it was computed from. A placement
  changes the versions of the lane that took the job, of the queue it came from, of the
  queues whose models that lane held or holds now (their holders' finish times moved) and of
  the lanes that hold a model whose holders changed (their reload costs moved): only those
  are evaluated again.
- The lanes wait in a heap by when they free, instead of a scan of every lane per step.
- `run` yields between steps of work over the queues or over the lanes once, so a caller on
  an event loop can serve others meanwhile (`dispatcher.decide`).

Nothing here is a rule: ties break as the reference breaks them (the earlier queue in queue
order, the first lane in snapshot order), and tests/unit/gateway/scheduler/test_search.py checks the
two agree, assignment by assignment, why included.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Sequence

from gateway.scheduler.affinity.choice import (
    Landing,
    Need,
    Option,
    Ranked,
    holders_finish_s,
    is_idle,
    land,
    landing,
    option_for,
    queue_bound,
    ranked,
    ratio_bound,
    settle,
)
from gateway.scheduler.affinity.lanes import Lane, advance, mean_speed
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, is_warm, load_s
from gateway.scheduler.snapshot import Assignment, JobView, Why

LaneOrder = tuple[float, float, str]
Rank = tuple[int, int, float, int]
"""A queue's place in `Search.by_bound`: negated priority, -1 for a queue no worker holds
(else 0), the negated bound on its options' ratio (no holder) or gain (held), its index."""

_BOUND_MARGIN = 1e-9
"""A bound is trusted to beat an option only by more than this relative margin: the two are
computed in different orders of float operations."""


class Search:
    """One call's assignments, found with what earlier steps of the call computed."""

    def __init__(self, farm: Farm, need: Need, queues: Sequence[Queue], tuning: Tuning):
        self.farm = farm
        self.need = need
        self.queues = queues
        self.tuning = tuning
        self.lane_version = dict.fromkeys(farm.lanes, 0)
        """Bumped when a lane changes or a model it holds changes holders."""
        self.queue_version = [0] * len(queues)
        """Bumped when a queue loses a job or a holder of its models changes."""
        self.taken = [0] * len(queues)
        """Bumped when a queue loses a job."""
        self.loaded: dict[tuple[str, int], int] = {}
        """Bumped for (lane, queue) when the lane gains or loses one of the queue's models, so
        its load of the queue changes; absent is 0."""
        self.queues_of: dict[str, list[int]] = {}
        for index, queue in enumerate(queues):
            for key in queue.models:
                self.queues_of.setdefault(key, []).append(index)
        self.options: dict[tuple[str, int], tuple[int, int, int, Option | None]] = {}
        self.placements = 0
        self.bounds: dict[tuple[str, int], tuple[int, int, float]] = {}
        self.loads: dict[tuple[str, int], tuple[int, float]] = {}
        self.landings: dict[tuple[str, int], tuple[int, Landing]] = {}
        self._may_run: dict[tuple[str, int], bool] = {}
        self.modelless = [i for i, queue in enumerate(queues) if not queue.models]
        self.ranks = [self.rank(index) for index in range(len(queues))]
        self.by_bound = sorted(rank for rank in self.ranks if rank is not None)
        """The non-empty queues in the order of the best key their options could have."""
        self.samples = [queue.first if queue.jobs else None for queue in queues]
        """A job of each queue as the call began (its last job may be taken meanwhile)."""
        asking = [lane for lane in farm.lanes.values() if lane.slots > 0]
        self.speed = {lane.name: mean_speed(lane.worker) for lane in asking}
        """Only lanes with a free slot ever ask (none gains one in a call)."""
        self.heap = [self.order(lane) for lane in asking]
        heapq.heapify(self.heap)
        self.done: set[str] = set()
        self.idle_done: set[str] = set()
        """Lanes that left every queue while idle: they look again after the next placement."""
        self.names = sorted(farm.lanes)

    def run(self) -> Iterator[Assignment | None]:
        """The assignments in the order the reference makes them, in steps of work over the
        queues or over the lanes once: None after a step that made no assignment."""
        while (lane := self.next_lane()) is not None:
            chosen = self.best_option(lane)
            if chosen is None:
                (self.idle_done if is_idle(lane) else self.done).add(lane.name)
                yield None
                continue
            option, index = chosen
            yield None  # each of choosing, finding where a load goes, and explaining is a step
            target = self.loader(option, index, lane)
            if not option.warm:
                yield None
            job = option.queue.take()
            why = self.explain(job, index, target)
            self.placed(target, advance(target, job), index)
            yield Assignment(job.job_id, target.name, why)
            for name in self.idle_done:
                heapq.heappush(self.heap, self.order(self.farm.lanes[name]))
            self.idle_done.clear()

    def order(self, lane: Lane) -> LaneOrder:
        """The reference's `next_lane` order: the lane that frees first, the faster on a tie."""
        return (max(lane.ready_s, self.farm.now_s), -self.speed[lane.name], lane.name)

    def next_lane(self) -> Lane | None:
        while self.heap:
            key = self.heap[0]
            lane = self.farm.lanes[key[2]]
            if self.waiting(lane) and key == self.order(lane):
                return lane  # left in the heap: it may be asked again
            heapq.heappop(self.heap)
        return None

    def waiting(self, lane: Lane) -> bool:
        return lane.slots > 0 and lane.name not in self.done and lane.name not in self.idle_done

    def best_option(self, lane: Lane) -> Ranked | None:
        """`choice.best_option`: every queue the lane holds, then the others by falling
        bound, until no bound can beat the best so far."""
        idle = is_idle(lane)
        held = frozenset(lane.resident)
        best: Ranked | None = None
        warm: Ranked | None = None
        for index in self.held_queues(held):
            if self.queues[index].jobs and self.may_run(lane, index):
                option = self.option(lane, index, idle)
                if option is not None:
                    best, warm = ranked(option, index, best, warm)
        for priority, unheld, bound, index in self.by_bound:
            if best is not None and _beaten(-priority, unheld < 0, -bound, best[0]):
                break  # so are the rest: they come in falling order
            if self.queues[index].models <= held or not self.may_run(lane, index):
                continue
            if (
                unheld < 0
                and best is not None
                and _beaten(-priority, True, self.bound(lane, index), best[0])
            ):
                continue
            option = self.option(lane, index, idle)
            if option is not None:
                best, warm = ranked(option, index, best, warm)
        return settle(best, warm, self.tuning)

    def held_queues(self, held: frozenset[str]) -> set[int]:
        """The queues whose models are all in `held` (those with none included)."""
        found = set(self.modelless)
        for key in held:
            for index in self.queues_of.get(key, ()):
                if self.queues[index].models <= held:
                    found.add(index)
        return found

    def rank(self, index: int) -> Rank | None:
        """The queue's place in `by_bound` (`Rank`); None once it is empty."""
        queue = self.queues[index]
        if not queue.jobs:
            return None
        done_s = holders_finish_s(queue, self.farm)
        if math.isinf(done_s):
            return (-queue.first.priority, -1, -queue_bound(queue, self.farm), index)
        return (-queue.first.priority, 0, -(done_s - self.farm.now_s), index)

    def rerank(self, index: int) -> None:
        old, new = self.ranks[index], self.rank(index)
        if old is not None:
            del self.by_bound[bisect.bisect_left(self.by_bound, old)]
        if new is not None:
            bisect.insort(self.by_bound, new)
        self.ranks[index] = new

    def option(self, lane: Lane, index: int, idle: bool) -> Option | None:
        key = (lane.name, index)
        lane_version, queue_version = self.lane_version[lane.name], self.queue_version[index]
        kept = self.options.get(key)
        # An idle lane also leaves a queue to a lane that would finish its next job sooner
        # (`choice.sooner_elsewhere_s`); placements elsewhere only make those lanes later (a
        # change to who holds the queue's models dates the queue), so a kept option stays,
        # and a kept refusal only until the next placement.
        if (
            kept is not None
            and kept[:2] == (lane_version, queue_version)
            and (kept[3] is not None or not idle or kept[2] == self.placements)
        ):
            return kept[3]
        queue = self.queues[index]
        option = option_for(lane, queue, self.farm, self.need, idle, self.tuning)
        self.options[key] = (lane_version, queue_version, self.placements, option)
        return option

    def bound(self, lane: Lane, index: int) -> float:
        """`choice.ratio_bound`: it depends on the queue and on the lane's load of it (its
        speed and the fastest speeds do not change), not on who else holds what."""
        key = (lane.name, index)
        lane_version, queue_version = self.loaded.get(key, 0), self.taken[index]
        kept = self.bounds.get(key)
        if kept is not None and kept[0] == lane_version and kept[1] == queue_version:
            return kept[2]
        bound = ratio_bound(lane, self.queues[index], self.farm)
        self.bounds[key] = (lane_version, queue_version, bound)
        return bound

    def may_run(self, lane: Lane, index: int) -> bool:
        """Whether the lane's worker may run queue `index`: the same for every job of a queue
        (`queue.class_key`), so looked up once per call."""
        key = (lane.name, index)
        found = self._may_run.get(key)
        if found is None:
            sample = self.samples[index]
            found = sample is not None and can_run(sample, lane.worker)
            self._may_run[key] = found
        return found

    def loader(self, option: Option, index: int, chooser: Lane) -> Lane:
        """`policy.loader`: the lane the chooser's cold queue goes to."""
        if option.warm:
            return chooser
        job = option.queue.first
        free_at_s = max(chooser.ready_s, self.farm.now_s)
        candidates = [
            (lane, self.landing(lane, index, job))
            for lane in self.farm.lanes.values()
            if self.waiting(lane)
            and self.may_run(lane, index)
            and max(lane.ready_s, self.farm.now_s) <= free_at_s
        ]
        return land(candidates, job, self.farm, self.tuning)

    def explain(self, job: JobView, index: int, target: Lane) -> Why:
        """`policy.explain`, with each lane's load of the queue kept between steps."""
        now_s = self.farm.now_s
        runner_up: tuple[float, str] | None = None
        mine = 0.0
        lanes = self.farm.lanes
        for name in self.names:
            lane = lanes[name]
            wait_s = max(lane.ready_s - now_s, 0.0)
            if name == target.name:
                mine = wait_s + (self.load(lane, index, job) + self.farm.run_s(lane, job))
                continue
            if runner_up is not None and wait_s >= runner_up[0]:
                continue  # its load and run only add to that: it cannot come first
            if not self.may_run(lane, index):
                continue
            done_s = wait_s + (self.load(lane, index, job) + self.farm.run_s(lane, job))
            if runner_up is None or done_s < runner_up[0]:
                runner_up = (done_s, name)
        return Why(
            reason="warm" if is_warm(job, target.resident) else "load",
            done_s=mine,
            runner_up=runner_up[1] if runner_up else None,
            runner_up_done_s=runner_up[0] if runner_up else None,
        )

    def load(self, lane: Lane, index: int, job: JobView) -> float:
        """Seconds to load what a job of queue `index` needs (all its jobs need the same)."""
        key = (lane.name, index)
        version = self.loaded.get(key, 0)
        kept = self.loads.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        seconds = load_s(job, lane.worker, lane.resident)
        self.loads[key] = (version, seconds)
        return seconds

    def landing(self, lane: Lane, index: int, job: JobView) -> Landing:
        key = (lane.name, index)
        version = self.lane_version[lane.name]
        kept = self.landings.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        place = landing(lane, job, self.farm, self.need)
        self.landings[key] = (version, place)
        return place

    def placed(self, before: Lane, after: Lane, index: int) -> None:
        """Put the lane that took a job of queue `index` in, and date what it changed."""
        self.farm.replace(after)
        self.placements += 1
        was, now = frozenset(before.resident), frozenset(after.resident)
        self.lane_version[after.name] += 1
        self.queue_version[index] += 1
        self.taken[index] += 1
        dated = {index}
        for key in was | now:
            for queue in self.queues_of.get(key, ()):
                self.queue_version[queue] += 1
                dated.add(queue)
        for queue in dated:  # their holders changed, or they lost a job: bounds moved
            self.rerank(queue)
        for key in was ^ now:
            for name in self.farm.holding.get(key, ()):
                self.lane_version[name] += 1
            for queue in self.queues_of.get(key, ()):
                pair = (after.name, queue)
                self.loaded[pair] = self.loaded.get(pair, 0) + 1
        if after.slots > 0:
            heapq.heappush(self.heap, self.order(after))


def _beaten(priority: int, unheld: bool, bound: float, best: Option) -> bool:
    """Whether every load with this priority and bound ranks below `best` by `Option.key`:
    a ratio bound for a queue no worker holds (`unheld`), else a gain bound."""
    if priority != best.priority:
        return priority < best.priority
    if best.warm:
        return False  # any load of its priority outranks warm work in the key
    if unheld != math.isinf(best.gain_s):
        return not unheld
    limit = best.ratio() if unheld else best.gain_s
    return bound * (1.0 + _BOUND_MARGIN) < limit
