"""How `affinity` makes a decision cheaply: the same choices as evaluating every lane against
every queue at every step (`place(..., prune=False)`), at a cost close to what changes.

- The queues the lane holds (its warm work) are found through an index by model key. For
  a lane with warm work the others are visited by falling ratio bound over every lane
  (`choice.queue_bound`, `by_ratio`) until none could earn the switch from it
  (`choice.admissible`); one is evaluated only when its ratio bound for this lane
  (`choice.ratio_bounds`) could earn it too. For a lane with none they are visited in the
  order of `Option.key` bounded over every lane (`by_bound`): those no worker holds by the
  bound on their `Option.first_ratio` (`choice.queue_first_bound`, then for the lane
  `choice.ratio_bounds`), then the others by the bound on any helper's gain
  (`choice.holders_finish_s`: no help makes a queue done before now), until none can beat
  the best load so far. Both orders are kept as queues lose jobs and holders change. The
  ratio bounds assume what the rules never produce otherwise: load, reload and fixed seconds
  are never negative.
- Options, bounds and per-lane costs are kept across the assignments of one call, each
  stamped with the versions of the lane and the queue it was computed from. A placement
  changes the versions of the lane that took the job, of the queue it came from, of the
  queues whose models that lane held or holds now (their holders' finish times moved) and of
  the lanes that hold a model whose holders changed (their reload costs moved): only those
  are evaluated again. An idle lane's refusal of a queue it leaves to a lane that finishes
  the queue's next job sooner (`choice.weigh`) is kept while neither lane takes a job and
  the queue keeps that job, and an idle lane that left every queue looks again only at the
  queues re-dated or left to a changed lane since.
- A lane the backlog's split restricts (`plan.Plan`) scans only its first choices, then, if
  it found nothing there, every queue (`kept_out`): the two scans of `choice.best_option`.
- The lanes wait in a heap by when they free, instead of a scan of every lane per step; the
  runner-up of `explain` is looked for among the lanes by when they free, until one frees
  after the best so far finishes.
- A queue is the group's head and a cursor, not a copy; a lane is a named tuple.
- `run` yields between steps of work over the queues or over the lanes once (a scan also
  after each queue weighed, which may look at every lane), so a caller on an event loop can
  serve others meanwhile (`dispatcher.decisions`).
- Queues are ranked (`by_bound`, `by_ratio`) only when a scan first needs the order.

Nothing here is a rule: ties break as the reference breaks them (the earlier queue in queue
order, the first lane in snapshot order), and tests/unit/gateway/scheduler/test_search.py checks the
two agree, assignment by assignment, why included.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Literal, TypeVar

from gateway.scheduler.affinity.choice import (
    Bounds,
    Landing,
    Need,
    Option,
    Ranked,
    admissible,
    better_load,
    better_warm,
    choose,
    holders_finish_s,
    is_idle,
    land,
    landing,
    peers,
    queue_bound,
    queue_first_bound,
    ratio_bounds,
    weigh,
)
from gateway.scheduler.affinity.lanes import Lane, advance, mean_speed
from gateway.scheduler.affinity.plan import Plan, first_choices
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, is_warm, load_s
from gateway.scheduler.snapshot import Assignment, JobView, Why

LaneOrder = tuple[float, float, str]
Verdict = Literal["stop", "skip", "weigh"]
RatioRank = tuple[int, float, int]
"""A queue's place in `Search.by_ratio`: negated priority, negated `choice.queue_bound`, index."""
Rank = tuple[int, int, float, int]
"""A queue's place in `Search.by_bound`: negated priority, -1 for a queue no worker holds
(else 0), the negated bound on its options' `first_ratio` (no holder) or gain (held), its
index."""
R = TypeVar("R", Rank, RatioRank)
T = TypeVar("T")
Steps = Generator[None, None, T]
"""Work in steps (None after each) that ends with a value."""

_BOUND_MARGIN = 1e-9
_RANK_CHUNK = 32
"""Queues ranked, or lanes looked at for a runner-up, per step (`_chunked`, `explain`)."""
_RELEASE_CHUNK = 2_000
"""Entries of the call's tables freed per step as it ends (`Search.release`)."""
"""A bound is trusted to beat an option only by more than this relative margin: the two are
computed in different orders of float operations."""


class Search:
    """One call's assignments, found with what earlier steps of the call computed."""

    def __init__(
        self,
        farm: Farm,
        need: Need,
        queues: Sequence[Queue],
        tuning: Tuning,
        plan: Plan | None = None,
    ):
        self.farm = farm
        self.need = need
        self.queues = queues
        self.tuning = tuning
        self.plan = plan
        self.first_choices: str | None = None  # a lane looking only at its first choices
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
        self.options: dict[
            tuple[str, int], tuple[int, int, tuple[str, int] | None, Option | None]
        ] = {}
        """(lane, queue) -> the lane's and the queue's versions it was found at and the
        option (None: refused); where an idle lane left the queue to a sooner lane, the
        placements on the lane, the jobs taken from the queue, and the sooner lane with the
        placements on it instead (`option`)."""
        self.weighed = 0
        """Queues weighed (`choice.weigh`) so far."""
        self.placed_on = dict.fromkeys(farm.lanes, 0)
        """Bumped when a lane takes a job."""
        self.bounds: dict[tuple[str, int], tuple[int, int, Bounds]] = {}
        self.loads: dict[tuple[str, int], tuple[int, float]] = {}
        self.landings: dict[tuple[str, int], tuple[int, Landing]] = {}
        self._may_run: dict[tuple[str, int], bool] = {}
        self.changes: list[tuple[set[str], set[int]]] = []
        """The lanes and the queues each placement re-dated, in order."""
        self.refused: dict[str, tuple[int, int]] = {}
        """Idle lane -> its version and the number of placements when it last left every
        queue."""
        self.leaning: dict[str, dict[str, set[int]]] = {}
        """Lane -> idle lane -> the queues that idle lane left to it as finishing sooner."""
        self.sooner: dict[int, str] = {}
        """Queue -> the last lane that an idle lane left it to, as finishing it sooner."""
        self.modelless = [i for i, queue in enumerate(queues) if not queue.models]
        self.ranks: list[Rank | None] = []
        self._by_bound: list[Rank] | None = None
        self.ratio_ranks: list[RatioRank | None] = []
        self._by_ratio: list[RatioRank] | None = None
        self.samples = [queue.first if queue.has_jobs else None for queue in queues]
        """A job of each queue as the call began (its last job may be taken meanwhile)."""
        asking = [lane for lane in farm.lanes.values() if lane.slots > 0]
        self.speed = {lane.name: mean_speed(lane.worker) for lane in asking}
        """Only lanes with a free slot ever ask (none gains one in a call)."""
        self.heap = [self.order(lane) for lane in asking]
        heapq.heapify(self.heap)
        self.done: set[str] = set()
        self.idle_done: set[str] = set()
        """Lanes that left every queue while idle: they look again after the next placement."""
        self._by_ready: list[tuple[float, str]] | None = None

    def run(self) -> Iterator[Assignment | None]:
        """The assignments in the order the reference makes them, in steps of work over the
        queues or over the lanes once: None after a step that made no assignment."""
        while (lane := self.next_lane()) is not None:
            chosen = yield from self.best_option(lane)
            if chosen is None:
                (self.idle_done if is_idle(lane) else self.done).add(lane.name)
                yield None
                continue
            option, index = chosen
            yield None  # each of choosing, finding where a load goes, and explaining is a step
            target = self.loader(option, index, lane)
            if not option.warm:
                yield None
            job = option.queue.take(option.behind)
            why = yield from self.explain(job, index, target)
            if option.behind:
                why = replace(why, ahead_of=option.behind)
            self.placed(target, advance(target, job), index)
            yield Assignment(job.job_id, target.name, why)
            for name in self.idle_done:
                heapq.heappush(self.heap, self.order(self.farm.lanes[name]))
            self.idle_done.clear()
        yield from self.release()

    def release(self) -> Iterator[None]:
        """Empty the tables kept for the call, a chunk per step: freed at once as the call
        ends, they would take one step of tens of milliseconds (20 ms at 100,000 jobs x 256
        workers x 256 models: `python -m bench.looplag`)."""
        for table in (self.loads, self._may_run, self.options, self.bounds, self.landings):
            while table:
                for _ in range(min(len(table), _RELEASE_CHUNK)):
                    table.popitem()
                yield None

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

    def best_option(self, lane: Lane) -> Steps[Ranked | None]:
        """`choice.best_option`: the queues the plan gives the lane first, then all of them.
        An idle lane that left every queue and has not changed since looks only at the
        queues whose refusal may have changed (every other still refuses it); any other lane
        looks at them all (`scan`). A step after each queue weighed (`choice.weigh`), which
        may look at every lane."""
        idle = is_idle(lane)
        dated = self.dated_since_refusal(lane) if idle else None
        chosen: Ranked | None = None
        if self.plan is not None and self.plan.restricts(lane.name):
            self.first_choices = lane.name
            try:
                chosen = yield from self.look(lane, idle, dated)
            finally:
                self.first_choices = None
        if chosen is None:
            chosen = yield from self.look(lane, idle, dated)
        if idle and chosen is None:
            self.refused[lane.name] = (self.lane_version[lane.name], len(self.changes))
        else:
            self.refused.pop(lane.name, None)
        return chosen

    def look(self, lane: Lane, idle: bool, dated: set[int] | None) -> Steps[Ranked | None]:
        if dated is None:
            return (yield from self.scan(lane, idle))
        return (yield from self.best_of(lane, dated, idle))

    def kept_out(self, lane: Lane, index: int) -> bool:
        """Whether the lane looks past the queue: it looks at its first choices only, and
        the plan does not give it this one."""
        return (
            self.first_choices == lane.name
            and self.plan is not None
            and not self.plan.allows(lane.name, self.queues[index])
        )

    def dated_since_refusal(self, lane: Lane) -> set[int] | None:
        """The queues re-dated, or whose sooner lane changed, since the lane last left every
        queue; None if it has not, or has changed since."""
        kept = self.refused.get(lane.name)
        if kept is None or kept[0] != self.lane_version[lane.name]:
            return None
        queues: set[int] = set()
        lanes: set[str] = set()
        for dated_lanes, dated_queues in self.changes[kept[1] :]:
            lanes |= dated_lanes
            queues |= dated_queues
        for name in lanes:
            queues |= self.leaning.get(name, {}).get(lane.name, set())
        return queues

    def best_of(self, lane: Lane, indices: Iterable[int], idle: bool) -> Steps[Ranked | None]:
        """`scan` over the given queues only, unpruned (so in any order)."""
        options: list[Ranked] = []
        for index in indices:
            if self.queues[index].has_jobs and self.may_run(lane, index):
                if self.kept_out(lane, index):
                    continue
                option = yield from self.option_steps(lane, index, idle)
                if option is not None:
                    options.append((option, index))
        return choose(options, self.tuning)

    def option_steps(self, lane: Lane, index: int, idle: bool) -> Steps[Option | None]:
        """`option`, and a step after it where it weighed the queue anew."""
        weighed = self.weighed
        option = self.option(lane, index, idle)
        if self.weighed != weighed:
            yield None
        return option

    def scan(self, lane: Lane, idle: bool) -> Steps[Ranked | None]:
        """`choice.choose` over every queue: the lane's warm work (the queues it holds), then
        the best load it may take over it (`switches`), or with no warm work the best load
        (`best_load`)."""
        held = frozenset(lane.resident)
        warm: Ranked | None = None
        for index in self.held_queues(held):
            if self.queues[index].has_jobs and self.may_run(lane, index):
                if self.kept_out(lane, index):
                    continue
                option = yield from self.option_steps(lane, index, idle)
                if option is not None:
                    warm = better_warm((option, index), warm)
        if warm is not None:
            best = yield from self.switches(lane, idle, held, warm[0])
            return best or warm
        return (yield from self.best_load(lane, idle, held))

    def best_load(self, lane: Lane, idle: bool, held: frozenset[str]) -> Steps[Ranked | None]:
        """The best load of a lane with no warm work: the queues by falling bound on
        `Option.key` (`by_bound`), until none can beat the best so far."""
        best: Ranked | None = None
        for rank in (yield from self.by_bound()):
            verdict = self.verdict(lane, rank, held, best)
            if verdict == "stop":
                break  # so are the rest: they come in falling order
            if verdict == "skip":
                continue
            index = rank[3]
            option = yield from self.option_steps(lane, index, idle)
            if option is not None:
                best = better_load((option, index), best)
        return best

    def switches(
        self, lane: Lane, idle: bool, held: frozenset[str], kept: Option
    ) -> Steps[Ranked | None]:
        """The best load the lane may take over its warm work `kept` (`admissible`): only
        queues of a higher priority, or of its priority whose ratio bound reaches
        `switch_ratio` times the warm work's, visited by falling ratio bound."""
        limit = self.tuning.switch_ratio * kept.ratio()
        best: Ranked | None = None
        for neg_priority, neg_bound, index in (yield from self.by_ratio()):
            priority = -neg_priority
            if priority < kept.priority:
                break
            if priority == kept.priority and _below(-neg_bound, limit):
                break  # so are the rest of its priority, and the lower ones
            if not self.loadable(lane, index, held):
                continue
            if priority == kept.priority and _below(self.bound(lane, index).ratio, limit):
                continue
            option = yield from self.option_steps(lane, index, idle)
            if option is not None and admissible(option, kept, self.tuning):
                best = better_load((option, index), best)
        return best

    def loadable(self, lane: Lane, index: int, held: frozenset[str]) -> bool:
        """Whether queue `index` is a load for the lane (holding `held`) that it may run and
        looks at now (`kept_out`)."""
        return (
            not self.queues[index].models <= held
            and self.may_run(lane, index)
            and not self.kept_out(lane, index)
        )

    def verdict(self, lane: Lane, rank: Rank, held: frozenset[str], best: Ranked | None) -> Verdict:
        """Whether a scan of a lane with no warm work stops at the queue `rank` places, skips
        it or weighs it: it stops where no load from here on could beat the best load so far;
        it skips a queue the lane holds or may not run, and one no worker holds whose ratio
        bound for this lane cannot beat the best load."""
        priority, unheld, bound, index = -rank[0], rank[1] < 0, -rank[2], rank[3]
        if best is not None and _beaten(priority, unheld, bound, best[0]):
            return "stop"
        if not self.loadable(lane, index, held):
            return "skip"
        if (
            unheld
            and best is not None
            and _beaten(priority, True, self.bound(lane, index).first_ratio, best[0])
        ):
            return "skip"
        return "weigh"

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
        if queue.taken >= len(queue.head):  # `not queue.has_jobs`, inline: once per queue
            return None
        done_s = holders_finish_s(queue, self.farm)
        if math.isinf(done_s):
            return (-queue.first.priority, -1, -queue_first_bound(queue, self.farm), index)
        return (-queue.first.priority, 0, -(done_s - self.farm.now_s), index)

    def by_bound(self) -> Steps[list[Rank]]:
        """The non-empty queues in the order of the best key their options could have: ranked
        on first use (a step per `_RANK_CHUNK` queues), then kept in order as queues lose jobs
        and holders change (`rerank`)."""
        if self._by_bound is None:
            self.ranks = yield from _chunked(self.rank, len(self.queues))
            self._by_bound = sorted(rank for rank in self.ranks if rank is not None)
        return self._by_bound

    def ratio_rank(self, index: int) -> RatioRank | None:
        queue = self.queues[index]
        if not queue.has_jobs:
            return None
        return (-queue.first.priority, -queue_bound(queue, self.farm), index)

    def by_ratio(self) -> Steps[list[RatioRank]]:
        """The non-empty queues by falling priority, then falling ratio bound over every lane:
        ranked on first use (a step per `_RANK_CHUNK` queues), then kept in order
        (`rerank`)."""
        if self._by_ratio is None:
            self.ratio_ranks = yield from _chunked(self.ratio_rank, len(self.queues))
            self._by_ratio = sorted(rank for rank in self.ratio_ranks if rank is not None)
        return self._by_ratio

    def rerank(self, index: int) -> None:
        """Keep the queue's place in both orders, each once it has been needed."""
        if self._by_bound is not None:
            _move(self._by_bound, self.ranks, index, self.rank(index))
        if self._by_ratio is not None:
            _move(self._by_ratio, self.ratio_ranks, index, self.ratio_rank(index))

    def option(self, lane: Lane, index: int, idle: bool) -> Option | None:
        key = (lane.name, index)
        lane_version, queue_version = self.lane_version[lane.name], self.queue_version[index]
        kept = self.options.get(key)
        if kept is not None:
            sooner = kept[2]
            if sooner is None:
                if kept[0] == lane_version and kept[1] == queue_version:
                    return kept[3]
            elif (
                kept[0] == self.placed_on[lane.name]
                and kept[1] == self.taken[index]
                and self.placed_on[sooner[0]] == sooner[1]
            ):
                return None
        self.weighed += 1
        queue = self.queues[index]
        hint = self.farm.lanes.get(self.sooner.get(index, ""))
        option, sooner_lane = weigh(lane, queue, self.farm, self.need, idle, self.tuning, hint)
        if sooner_lane is None:
            self.options[key] = (lane_version, queue_version, None, option)
            return option
        # The idle lane left the queue to a lane that finishes its next job sooner, and had
        # not waited beside it long enough to take it anyway (`choice.weigh`): that holds,
        # whoever else holds what, while neither lane takes a job and the queue keeps its
        # next job (placements elsewhere only make other lanes later; a kept option or a
        # refusal with no sooner lane stays while neither the lane nor the queue is dated).
        name = sooner_lane.name
        stamp = (self.placed_on[lane.name], self.taken[index], (name, self.placed_on[name]), None)
        self.options[key] = stamp
        self.sooner[index] = name
        self.leaning.setdefault(name, {}).setdefault(lane.name, set()).add(index)
        return None

    def bound(self, lane: Lane, index: int) -> Bounds:
        """`choice.ratio_bounds`: they depend on the queue and on the lane's load of it (its
        speed and the fastest speeds do not change), not on who else holds what."""
        key = (lane.name, index)
        lane_version, queue_version = self.loaded.get(key, 0), self.taken[index]
        kept = self.bounds.get(key)
        if kept is not None and kept[0] == lane_version and kept[1] == queue_version:
            return kept[2]
        bound = ratio_bounds(lane, self.queues[index], self.farm)
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
        """`policy.loader`: the lane the chooser's queue goes to."""
        if option.behind:
            return chooser
        job = option.queue.first
        free_at_s = max(chooser.ready_s, self.farm.now_s)
        candidates = [
            (lane, self.landing(lane, index, job))
            for lane in peers(option, chooser, self.farm)
            if lane.slots > 0
            and lane.name not in self.done
            and self.may_run(lane, index)
            and max(lane.ready_s, self.farm.now_s) <= free_at_s
        ]
        return land(candidates, job, self.farm, self.tuning)

    def explain(self, job: JobView, index: int, target: Lane) -> Steps[Why]:
        """`policy.explain`, with each lane's load of the queue kept between steps: the
        runner-up is the lane that finishes first (the first name on a tie), found among the
        lanes by when they free, until one frees after the best so far finishes; a step
        after every `_RANK_CHUNK` lanes looked at."""
        now_s = self.farm.now_s
        lanes = self.farm.lanes
        runner_up: tuple[float, str] | None = None
        for seen, (ready_s, name) in enumerate(self.by_ready(), start=1):
            if seen % _RANK_CHUNK == 0:
                yield None
            wait_s = max(ready_s - now_s, 0.0)
            if runner_up is not None and wait_s > runner_up[0]:
                break  # its load and run only add to that: neither it nor a later one wins
            if name == target.name or not self.may_run(lane := lanes[name], index):
                continue
            done_s = wait_s + (self.load(lane, index, job) + self.farm.run_s(lane, job))
            if runner_up is None or (done_s, name) < runner_up:
                runner_up = (done_s, name)
        wait_s = max(target.ready_s - now_s, 0.0)
        mine = wait_s + (self.load(target, index, job) + self.farm.run_s(target, job))
        return Why(
            reason="warm" if is_warm(job, target.resident) else "load",
            done_s=mine,
            runner_up=runner_up[1] if runner_up else None,
            runner_up_done_s=runner_up[0] if runner_up else None,
            first_choices=first_choices(self.plan, target.name),
        )

    def by_ready(self) -> list[tuple[float, str]]:
        """Every lane's (ready_s, name) in order, built on first use and kept in order as
        lanes take jobs (`placed`)."""
        if self._by_ready is None:
            self._by_ready = sorted((lane.ready_s, name) for name, lane in self.farm.lanes.items())
        return self._by_ready

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
        if self._by_ready is not None:
            del self._by_ready[bisect.bisect_left(self._by_ready, (before.ready_s, before.name))]
            bisect.insort(self._by_ready, (after.ready_s, after.name))
        self.farm.replace(after)
        was, now = frozenset(before.resident), frozenset(after.resident)
        self.taken[index] += 1
        self.placed_on[after.name] += 1
        lanes = {after.name}
        queues = {index}
        for key in was | now:
            queues.update(self.queues_of.get(key, ()))
        for key in was ^ now:
            lanes.update(self.farm.holding_of(key))
            for queue in self.queues_of.get(key, ()):
                pair = (after.name, queue)
                self.loaded[pair] = self.loaded.get(pair, 0) + 1
        for name in lanes:
            self.lane_version[name] += 1
        for queue in queues:
            self.queue_version[queue] += 1
        for queue in queues:  # their holders changed, or they lost a job: bounds moved
            self.rerank(queue)
        self.changes.append((lanes, queues))
        if after.slots > 0:
            heapq.heappush(self.heap, self.order(after))


def _chunked(rank: Callable[[int], T], count: int) -> Steps[list[T]]:
    """`[rank(i) for i in range(count)]`, a step after every `_RANK_CHUNK`: ranking every queue
    of a large farm at once is one step of milliseconds (4 ms at 256 workers x 256 models)."""
    out: list[T] = []
    for index in range(count):
        out.append(rank(index))
        if len(out) % _RANK_CHUNK == 0:
            yield None
    return out


def _move(order: list[R], ranks: list[R | None], index: int, new: R | None) -> None:
    """Put queue `index` at its new place `new` (None: out) in the sorted `order`."""
    old = ranks[index]
    if old is not None:
        del order[bisect.bisect_left(order, old)]
    if new is not None:
        bisect.insort(order, new)
    ranks[index] = new


def _beaten(priority: int, unheld: bool, bound: float, best: Option) -> bool:
    """Whether every load with this priority and bound ranks below the load `best` by
    `Option.key`: a `first_ratio` bound for a queue no worker holds (`unheld`), else a gain
    bound."""
    if priority != best.priority:
        return priority < best.priority
    if unheld != math.isinf(best.gain_s):
        return not unheld
    return _below(bound, best.first_ratio() if unheld else best.gain_s)


def _below(bound: float, limit: float) -> bool:
    """Whether an upper bound is surely under `limit` (by more than `_BOUND_MARGIN`)."""
    return bound * (1.0 + _BOUND_MARGIN) < limit
