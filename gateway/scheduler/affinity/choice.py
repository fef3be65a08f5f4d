"""What one worker would do for one queue, and which queue it should serve next.

For a worker (a lane) and a queue of interchangeable jobs:

- It is *useful* to the queue when it would finish the queue's next job before the other
  workers holding the queue's models finish the whole queue together (`fluid.finish_s`): the
  water-filling test, so a second copy of a model is loaded exactly when its queue outgrows
  what its warm copies can serve, and a clearly faster card is left its work. A worker that
  holds the models itself is judged exactly: the holders never finish the job sooner than
  the first of them could run it whole (`holders_done_s`; the fluid split is optimistic by
  up to one job, which for a load keeps the lean towards the warm copies). The cells that
  need it: one checkpoint on a mixed farm, where every card holds it and the fluid split of
  a short queue over the busy fast cards left an idle slow card waiting out its ski-rental
  bound: mean latency 2.37 s against `ect_greedy`'s 1.85 on 6 H200s and 6 RTX 4070 Tis at
  93 % load, 1.86 s with it. An idle worker whose load evicts nothing judges the holders
  on clearing the queue with the jobs still arriving for it (`clear_s`: the fluid busy
  period), not on the queue as it stands.
- A worker that holds the models, when a clearly faster holder would finish the queue's next
  job sooner, takes instead the first job behind it that it finishes before the holders,
  serving the queue in order, could reach that job (`first_behind`): a slow card takes the
  small jobs and leaves the fast ones the large.
- An idle worker leaves a queue to the others only when it is not useful to it or another
  worker would finish its next job sooner, and only while the queue's jobs have waited
  beside it, summed (`clock_s`; the next job's own wait once arrivals have stopped), less
  than the ski-rental bound: its load plus its extra run time over the fastest card; when
  the holders are the ones it waits for, counted from when the first is due to free.
  (Cells that need the bound: batch100 and burst16 on mixed16, where a slow card that
  loaded an SDXL job after waiting its load time alone finished it 9 s after the fast
  holders were done. The sum, not the next job's own wait: leaving the worker idle costs
  every waiting job its wait, so a queue that piles up beside it buys it sooner. On random
  farms of cards no rule was tuned on (`bench.sweep` with a card 3.6x slower than an H200
  and one with a slow disk): 4 H200s and 4 of the slow cards at 88 % load over one
  checkpoint, mean latency 3.00 s against `affinity_only`'s 2.43, every fast card busy and
  the slow ones idle while jobs waited; 2.68 s with it.)
- Among the queues it is useful to (or bound to serve) whose models it holds, it takes the
  first in queue order; among jobs that all arrived while it sat idle (a burst) the one
  where it is most needed (`Option.gain_s`), as a load does (cells that need it: bursts on
  farms whose workers hold several models, `--cache-lru`, where a worker holding a model
  nobody else holds took the burst's first job of a shared one, and the other model's job
  was then loaded elsewhere). Loads are ranked by priority, then by how much sooner the
  queue is done with this worker's help (`Option.gain_s`: a queue no worker holds first, its whole
  wait; then water-filling, the queue whose holders would finish it last gains most; cells
  that need it: burst16 on flags4, mixed16 and mixed4 with LRU, where a free card that
  loaded the cheapest model left the bottleneck's big jobs to one holder), then by what the
  load buys per second it blocks the worker (`Option.first_ratio`): the summed wait and cost
  of the share of the queue it would serve over the cost of its first job, (waited + cost) /
  (load + reloads it causes + one run), cost = load + reloads + the share's runs, scaled by
  how fast this card runs the family against the fastest other card (comparative
  advantage). The cell that needs the first job's cost rather than the whole share's:
  poisson95 uniform4 K=4N, where busy workers loaded lone old jobs of rare checkpoints while
  8-13 jobs of the popular one, which no worker then held, waited (goodput 0.85 -> 0.97 good
  jobs/s, 8 seeds; swarm_like 1.12). A worker with warm work takes a load over it only
  when the load's response ratio, (waited + cost) / cost over its share, is `switch_ratio`
  times its warm work's, or its priority is higher (`admissible`). A load must be earned by
  waiting; under heavy load every wait grows together, so each load serves more jobs instead
  of loads multiplying. Both ratios grow with the wait without bound: no job waits forever.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gateway.scheduler.affinity.fluid import finish_s, share
from gateway.scheduler.affinity.lanes import Lane
from gateway.scheduler.affinity.plan import Plan
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, evicted, is_warm, key_load_s, load_s, models_of
from gateway.scheduler.snapshot import JobView


@dataclass(frozen=True)
class Option:
    """`lane` serving (its share of) `queue` next."""

    queue: Queue
    warm: bool
    load_s: float
    evict_s: float
    jobs: float
    """How many of the queue's jobs it would serve (its fluid share, at least one)."""
    run_s: float
    waited_s: float
    advantage: float
    priority: int
    gain_s: float = math.inf
    """How much sooner the queue is done with this worker serving it than by the other
    workers that hold its models (`fluid.finish_s`); inf when no other worker holds them."""
    fresh: bool = False
    """The queue's next job arrived after the worker went idle (a burst just in: the worker
    passed nothing over that was waiting for it; false for a busy worker)."""
    behind: int = 0
    """Which job of the queue it takes: 0 its next one; k > 0 the k-th behind it, one it
    finishes before the queue's clearly faster holders could reach it (`first_behind`)."""

    @property
    def cost_s(self) -> float:
        return self.load_s + self.evict_s + self.run_s

    def ratio(self) -> float:
        """The response ratio of its share, (waited + cost) / cost: what a load must earn over
        warm work (`admissible`)."""
        return (self.waited_s + self.cost_s) / self.cost_s * self.advantage

    def first_ratio(self) -> float:
        """How a load ranks among loads (`key`): its share's waited and cost seconds over the
        cost of its first job, (waited + cost) / (load + reloads + one run). The load is paid
        once and the jobs behind it ride warm, so a queue of many jobs that each waited a
        while comes before a lone job that waited as long, which the response ratio would
        serve first (its cost counts every run of the share); it grows with the wait without
        bound, like the response ratio."""
        first_s = self.load_s + self.evict_s + self.run_s / self.jobs
        return (self.waited_s + self.cost_s) / first_s * self.advantage

    def key(self) -> tuple[int, float, float, float]:
        """Among loads, higher is better: priority, then the gain, then `first_ratio`."""
        return (self.priority, self.gain_s, self.first_ratio(), self.jobs / self.cost_s)


@dataclass(frozen=True)
class Need:
    """What the waiting queues and the recent traffic need kept resident."""

    waiting: frozenset[str]
    """Model keys some waiting job needs."""
    demand_per_s: Mapping[str, float]
    settled: bool = False
    """Arrivals have stopped (`plan.settled`): the workers drain the queues on their own."""


def alone_s(lane: Lane, queue: Queue, farm: Farm) -> float:
    """Seconds the lane would need to run the whole queue warm."""
    speed, fixed_s = farm.rate(lane, queue.first.family)
    return queue.count * fixed_s + queue.work_units / speed


def reload_s(
    lane: Lane, keys: Iterable[str], family: str, farm: Farm, need: Need, horizon_s: float
) -> float:
    """Seconds of loads that evicting `keys` from the lane will cost later: a full load for a
    key a waiting job needs, a share for one that traffic will likely ask for within
    `horizon_s`; nothing for a key another worker holds."""
    total = 0.0
    for key in keys:
        if farm.held_elsewhere(key, lane.name):
            continue
        if key in need.waiting:
            weight = 1.0
        else:
            weight = min(need.demand_per_s.get(key, 0.0) * horizon_s, 1.0)
        if weight > 0.0:
            total += weight * key_load_s(lane.worker, key, family)
    return total


def option_for(
    lane: Lane, queue: Queue, farm: Farm, need: Need, idle: bool, tuning: Tuning
) -> Option | None:
    """What serving `queue` next would be for `lane`; None when it should leave it to others."""
    return weigh(lane, queue, farm, need, idle, tuning)[0]


def weigh(
    lane: Lane,
    queue: Queue,
    farm: Farm,
    need: Need,
    idle: bool,
    tuning: Tuning,
    hint: Lane | None = None,
) -> tuple[Option | None, Lane | None]:
    """`option_for`, and where the idle `lane` leaves the queue to a lane that would finish its
    next job sooner before its wait beside it has run out, such a lane: while neither of the
    two takes a job and the queue keeps its next job, the refusal stands, whoever holds what.
    `hint` is looked at first (the last such lane for the queue is often one again)."""
    job = queue.first
    now_s = farm.now_s
    warm = farm.is_warm(lane, queue)
    load = 0.0 if warm else load_s(job, lane.worker, lane.resident)
    waited_s = queue.waited_s(now_s)
    if (
        not idle
        and not warm
        and (too_slow(lane, job.family, farm, tuning) or waited_s < tuning.patience * load)
    ):
        return None, None  # the cheap half of the busy worker's test below, first
    start_s = max(lane.ready_s, now_s) + load
    done_s = start_s + farm.run_s(lane, job)
    hold_s = hold_bound_s(lane, job, farm, load) if idle else 0.0
    beside_s = clock_s(lane, queue, now_s, need) if idle else 0.0
    if idle and beside_s < hold_s:
        # Work conservation: an idle worker leaves a queue only to a worker that finishes its
        # next job sooner, and only for the ski-rental wait. The wait has not run out (nor
        # can the clock of `overdue_s`, which is never longer), so a sooner lane settles it.
        sooner = sooner_elsewhere(lane, queue, farm, done_s, hint)
        if sooner is not None:
            return None, sooner
    holders = farm.holders(queue, lane.name)
    others = [(max(h.ready_s, now_s), alone_s(h, queue, farm)) for h in holders]
    behind = first_behind(lane, queue, farm, holders, start_s, tuning.tie_share) if warm else 0
    if behind and overdue_s(farm, others, waited_beside_s(lane, job, now_s)) >= hold_bound_s(
        lane, job, farm, 0.0
    ):
        # Skipping is bounded by the clock of guarantee 1, the next job's own: once a holder
        # is due to have freed and it has waited out the bound beside this lane, it is not
        # skipped.
        behind = 0
    gone = () if warm else evicted(lane.resident, queue.models, lane.worker.cache_slots)
    if behind:
        job = queue.head[queue.taken + behind]
        done_s = start_s + farm.run_s(lane, job)
        useful = True
    else:
        useful = done_s <= (
            holders_done_s(others, holders, job, farm)
            if warm
            else clear_s(queue, others, now_s, idle and not gone and not need.settled)
        )
    evict = 0.0
    if idle:
        # No lane finishes it sooner, or the wait has run out (then a useful lane serves).
        overdue = beside_s if useful else overdue_s(farm, others, beside_s)
        serve = overdue >= hold_s or (useful and done_s <= math.inf)  # false for NaN
    elif warm:
        serve = useful
    else:
        evict = reload_s(lane, gone, job.family, farm, need, tuning.horizon_s)
        serve = useful and waited_s >= tuning.patience * (load + evict)
    if not serve:
        return None, None
    if idle and not warm:
        evict = reload_s(lane, gone, job.family, farm, need, tuning.horizon_s)
    mine_s = alone_s(lane, queue, farm)
    fraction = share(start_s, mine_s, others) if others else 1.0
    gain_s = finish_s(others) - finish_s([*others, (start_s, mine_s)]) if others else math.inf
    jobs = max(fraction * queue.count, 1.0)
    option = Option(
        queue=queue,
        warm=warm,
        load_s=load,
        evict_s=evict,
        jobs=jobs,
        run_s=jobs * mine_s / queue.count,
        waited_s=waited_s * jobs / queue.count,
        advantage=farm.advantage(lane, job.family),
        priority=job.priority,
        gain_s=gain_s,
        fresh=arrived_since_idle(lane, job),
        behind=behind,
    )
    return option, None


def first_behind(
    lane: Lane, queue: Queue, farm: Farm, holders: Sequence[Lane], start_s: float, tie: float
) -> int:
    """Which job of the queue a warm `lane` takes instead of the next one: k > 0 for the k-th
    behind it, 0 for the next one as `weigh` judges it. A lane leaves the next job to a
    clearly faster holder (by more than `tie`, the share within which like cards are noise)
    that finishes it sooner, and takes the first job behind it that it finishes before the
    holders could reach that job. They serve the queue in order, so they reach a job only
    after running every job up to it, never sooner than from the first one's free time at
    their summed speed, nor sooner than the fastest could run that job alone: a lower bound,
    so no job is taken that a holder would have finished first. So on a farm of fast and
    slow cards a slow card takes the small jobs the fast ones would reach last, and leaves
    them the large ones (cell: one checkpoint on mixed4 at 95 % load, mean latency 5.4 s
    against `ect_greedy`'s 4.9, which binds each job on arrival where it finishes first)."""
    if not holders:
        return 0
    family = queue.first.family
    rates = [farm.rate(holder, family) for holder in holders]
    fastest = max(speed for speed, _ in rates)
    if farm.speed(lane, family) * (1.0 + tie) >= fastest:
        return 0  # like cards: nothing to match, first come first served
    head = queue.first
    frees_s = [max(holder.ready_s, farm.now_s) for holder in holders]
    holder_s = min(
        free_s + fixed_s + head.work_units / speed
        for free_s, (speed, fixed_s) in zip(frees_s, rates, strict=True)
    )
    if start_s + farm.run_s(lane, head) <= holder_s:
        return 0  # it finishes the next job first itself
    first_free_s, summed = min(frees_s), sum(speed for speed, _ in rates)
    work = head.work_units
    for k in range(queue.taken + 1, len(queue.head)):
        job = queue.head[k]
        work += job.work_units
        reach_s = first_free_s + max(work / summed, job.work_units / fastest)
        if start_s + farm.run_s(lane, job) <= reach_s:
            return k - queue.taken
    return 0


def arrived_since_idle(lane: Lane, job: JobView) -> bool:
    idle_since_s = lane.worker.idle_since_s
    return idle_since_s is not None and job.enqueued_at_s >= idle_since_s


def sooner_elsewhere(
    lane: Lane, queue: Queue, farm: Farm, done_s: float, hint: Lane | None = None
) -> Lane | None:
    """A lane other than `lane` that does not hold the queue's models and would finish its
    next job, loading them, before `done_s` (`hint` first if given, then in the farm's
    order); None if none."""
    job = queue.first
    now_s = farm.now_s
    lanes = farm.lanes.values() if hint is None else (hint, *farm.lanes.values())
    for other in lanes:
        if other.name == lane.name or not can_run(job, other.worker):
            continue
        if farm.is_warm(other, queue):
            continue  # holders are counted by the fluid test
        start_s = max(other.ready_s, now_s) + load_s(job, other.worker, other.resident)
        if start_s + farm.run_s(other, job) < done_s:
            return other
    return None


def hold_bound_s(lane: Lane, job: JobView, farm: Farm, load: float) -> float:
    """The ski-rental bound: how long a job may wait beside the idle `lane` for a worker that
    finishes it sooner. Buying (running it here) costs the load plus the extra run time of
    this card over the fastest card for the family; waiting longer than that premium would
    cost more than buying at once, so the wait is at most twice the best choice's delay."""
    return load + max(farm.run_s(lane, job) - farm.fastest_run_s(job), 0.0)


def waited_beside_s(lane: Lane, job: JobView, now_s: float) -> float:
    """How long the job has waited while this worker sat idle."""
    waited_s = now_s - job.enqueued_at_s
    idle_since_s = lane.worker.idle_since_s
    return waited_s if idle_since_s is None else min(waited_s, now_s - idle_since_s)


def clock_s(lane: Lane, queue: Queue, now_s: float, need: Need) -> float:
    """The ski-rental clock of an idle worker for a queue it leaves to others. While jobs
    still arrive, the waits of all the queue's jobs beside it (`queue_beside_s`): every job a
    worker takes off a queue that arrivals keep full shortens the wait of every later one, so
    every waiting job pays for the idle worker. Once arrivals have stopped (`Need.settled`),
    the workers drain the queue on their own and the next job's own wait is the clock: a
    batch's makespan is decided by its last jobs, and a slow card that takes one the fast
    cards would finish long before it only lengthens it (a batch of 40 on 4 H200s, 4 cards
    with slow disks and 4 cards 3.6x slower, 36 checkpoints: makespan 22 -> 37 s in two seeds
    of four with the sum)."""
    if need.settled:
        return waited_beside_s(lane, queue.first, now_s)
    return queue_beside_s(lane, queue, now_s)


def queue_beside_s(lane: Lane, queue: Queue, now_s: float) -> float:
    """The ski-rental clock of an idle worker for a queue: the waits of the queue's jobs while
    the worker sat idle, summed. Every waiting job pays for leaving the worker idle, so a
    queue of n jobs runs the clock n times as fast as one job, and one job alone runs it at
    its own wait (`waited_beside_s`). Read from the group's sums: its summed wait, but no more
    than its count times the worker's idle time (never less than the exact sum, which counts
    each job's wait only since the worker went idle)."""
    summed_s = queue.waited_s(now_s)
    idle_since_s = lane.worker.idle_since_s
    if idle_since_s is None:
        return summed_s
    return min(summed_s, queue.count * max(now_s - idle_since_s, 0.0))


def overdue_s(farm: Farm, holders: Sequence[tuple[float, float]], beside_s: float) -> float:
    """The ski-rental clock (`beside_s`, the wait beside the idle worker) when the holders of
    a queue's models finish it before this idle worker could finish one job of it
    (`holders`: each one's free time, at least now, and seconds for the queue, as
    `fluid.finish_s` takes them): it counts only once the first holder is due to have freed.
    While every holder is expected to free later, waiting for them is cheaper than loading
    here, so no load is forced a second before a holder frees; once one is due and still
    busy (a stalled or underestimated job), the bound caps the wait. So such a job leaves an
    idle worker's side by the later of the bound and the holders' expected free time."""
    if holders and min(free_s for free_s, _ in holders) > farm.now_s:
        return 0.0
    return beside_s


def too_slow(lane: Lane, family: str, farm: Farm, tuning: Tuning) -> bool:
    return farm.speed(lane, family) * tuning.slow_ratio <= farm.best_speed(family)


def is_idle(lane: Lane) -> bool:
    """Holding nothing and given nothing in this call."""
    return lane.worker.outstanding == 0 and lane.slots == lane.worker.free_slots


@dataclass(frozen=True)
class Landing:
    """What places a lane in the order of where a load goes (`load_order`), the size of the
    job apart: kept while the lane does not change."""

    start_s: float
    """When it could start the job's run: free, then its models loaded."""
    warm: bool
    reload_s: float = 0.0
    """What evicting for it costs (`reload_s` with no horizon)."""
    traffic: float = 0.0
    """Seconds of reload per second that its evictions will cost from recent traffic: each
    evicted model no other worker holds (as `reload_s`, a copy held elsewhere is not lost),
    its recent jobs per second times its load seconds."""
    unique: int = 0
    """Warm: how many of the models it holds no other worker holds (what only it can serve
    warm)."""


def landing(lane: Lane, job: JobView, farm: Farm, need: Need) -> Landing:
    start_s = max(lane.ready_s, farm.now_s) + load_s(job, lane.worker, lane.resident)
    if is_warm(job, lane.resident):
        unique = sum(1 for key in lane.resident if not farm.held_elsewhere(key, lane.name))
        return Landing(start_s, warm=True, unique=unique)
    gone = evicted(lane.resident, models_of(job), lane.worker.cache_slots)
    traffic = sum(
        need.demand_per_s.get(key, 0.0) * key_load_s(lane.worker, key, job.family)
        for key in gone
        if not farm.held_elsewhere(key, lane.name)
    )
    return Landing(start_s, False, reload_s(lane, gone, job.family, farm, need, 0.0), traffic)


def peers(option: Option, chooser: Lane, farm: Farm) -> Iterable[Lane]:
    """The lanes the next job of the queue `chooser` would serve may go to, before the test of
    when they free (`land` picks among those): for warm work the chooser and the queue's
    other holders, for a load every lane."""
    if option.warm:
        return [chooser, *farm.holders(option.queue, chooser.name)]
    return farm.lanes.values()


def land(
    candidates: Sequence[tuple[Lane, Landing]], job: JobView, farm: Farm, tuning: Tuning
) -> Lane:
    """Where a job goes among the lanes free as soon as the chooser (for a warm job, those of
    them that hold its models): those that finish it within `tuning.tie_share` of the
    earliest count as tied (the learned speeds of like cards differ by noise). Among them a
    warm one, the one holding the fewest models no other worker holds (so the workers that
    alone hold a model stay free for its jobs); else the one whose evictions cost least, then
    the one whose evicted models' recent traffic will cost the least reload (jobs per second
    times load seconds: an SDXL model costs its longer load), then the one holding the fewest
    models (so like workers come to hold different models); then the earliest, then the first
    by name."""
    done = [(place.start_s + farm.run_s(lane, job), lane, place) for lane, place in candidates]
    first_s = min(done_s for done_s, _, _ in done)
    limit_s = farm.now_s + (first_s - farm.now_s) * (1.0 + tuning.tie_share) + 1e-9
    tied = [entry for entry in done if entry[0] <= limit_s]
    return min(tied, key=lambda entry: _tie_order(*entry))[1]


def _tie_order(
    done_s: float, lane: Lane, place: Landing
) -> tuple[float, float, float, float, float, str]:
    if place.warm:
        return (0.0, place.unique, 0.0, 0.0, done_s, lane.name)
    return (1.0, round(place.reload_s, 6), place.traffic, len(lane.resident), done_s, lane.name)


def best_option(
    lane: Lane,
    queues: Iterable[Queue],
    farm: Farm,
    need: Need,
    idle: bool,
    tuning: Tuning,
    plan: Plan | None = None,
) -> Option | None:
    """The queue `lane` should serve next, or None to leave it idle (`choose`): among the
    queues the backlog's plan gives it first (`Plan.allows`), then among all of them.

    Every queue is evaluated: the reference that `search.Search` (which skips the queues that
    cannot win) must agree with."""
    options = []
    for index, queue in enumerate(queues):
        if not queue.has_jobs or not can_run(queue.first, lane.worker):
            continue
        option = option_for(lane, queue, farm, need, idle, tuning)
        if option is not None:
            options.append((option, index))
    chosen = None
    if plan is not None and plan.restricts(lane.name):
        chosen = choose([o for o in options if plan.allows(lane.name, o[0].queue)], tuning)
    chosen = chosen or choose(options, tuning)
    return None if chosen is None else chosen[0]


Ranked = tuple[Option, int]
"""An option and the place of its queue in queue order (the earlier wins a tie)."""


def choose(options: Sequence[Ranked], tuning: Tuning) -> Ranked | None:
    """Among a lane's options: the best load it may take over its warm work (`admissible`)
    by `Option.key`, else its warm work, the first in queue order (`better_warm`)."""
    warm: Ranked | None = None
    for entry in options:
        if entry[0].warm:
            warm = better_warm(entry, warm)
    kept = None if warm is None else warm[0]
    best: Ranked | None = None
    for entry in options:
        if not entry[0].warm and admissible(entry[0], kept, tuning):
            best = better_load(entry, best)
    return best or warm


def admissible(load: Option, warm: Option | None, tuning: Tuning) -> bool:
    """Whether a worker may take `load` over its best warm work: when it has none, when the
    load has a higher priority, or, at the same priority, when the load's response ratio is
    `switch_ratio` times the warm work's."""
    if warm is None:
        return True
    if load.priority != warm.priority:
        return load.priority > warm.priority
    return load.ratio() >= tuning.switch_ratio * warm.ratio()


def better_load(option: Ranked, best: Ranked | None) -> Ranked:
    """The better of two loads by `Option.key`; on a tie the earlier queue, in whatever order
    they are seen."""
    if best is None or _before(option[0].key(), option[1], best[0].key(), best[1]):
        return option
    return best


def better_warm(option: Ranked, warm: Ranked | None) -> Ranked:
    """The better of two warm options by `_warm_key`, then the earlier queue."""
    if warm is None or _before(_warm_key(option[0]), option[1], _warm_key(warm[0]), warm[1]):
        return option
    return warm


def _before(key: tuple[float, ...], index: int, other: tuple[float, ...], other_index: int) -> bool:
    return key > other or (key == other and index < other_index)


class Bounds(NamedTuple):
    """Upper bounds on a lane's `Option.ratio` and `Option.first_ratio` for a queue."""

    ratio: float
    first_ratio: float


def ratio_bounds(lane: Lane, queue: Queue, farm: Farm) -> Bounds:
    """Upper bounds on `Option.ratio` and `Option.first_ratio` of `option_for(lane, queue,
    ...)` for a queue the lane does not hold, cheap to compute: the ratios with no reloads
    and the whole queue served. For `ratio`, it grows with the share served, and load and
    reload seconds are never negative. For `first_ratio` = (f W + L' + f R) / (L' + R / n),
    the share f of the n jobs at least 1 / n and at most 1 and L' = load + reloads: f (W + R)
    >= R / n, so it falls as L' grows from the load L and is at most (W + L + R) / (L +
    R / n). inf where that reasoning does not hold (no run time to divide by, a negative
    load)."""
    job = queue.first
    speed, fixed_s = farm.rate(lane, job.family)
    run_s = queue.count * fixed_s + queue.work_units / speed  # `alone_s`, inline: a hot path
    load = load_s(job, lane.worker, lane.resident)
    if load < 0.0 or run_s <= 0.0:
        return Bounds(math.inf, math.inf)
    waited_s = max(queue.count * farm.now_s - queue.enqueued_s_sum, 0.0)  # `Queue.waited_s`
    advantage = farm.advantage(lane, job.family)
    cost_s = load + run_s
    first_s = load + run_s / queue.count
    return Bounds((1.0 + waited_s / cost_s) * advantage, (waited_s + cost_s) / first_s * advantage)


def holders_done_s(
    others: Sequence[tuple[float, float]], holders: Iterable[Lane], job: JobView, farm: Farm
) -> float:
    """When the other holders (`others` as `fluid.finish_s` takes them) would finish the
    queue whose next job is `job`: the fluid finish, but never before the first of them
    could finish that one job whole. The fluid split is optimistic by up to one job's run
    (jobs are not divisible); for a short queue on several holders it would call an idle
    card useless for a job it finishes before any holder could (one checkpoint on a mixed
    farm, where every card holds it)."""
    fluid_s = finish_s(others)
    if math.isinf(fluid_s):
        return fluid_s
    now_s = farm.now_s
    first_s = min(max(h.ready_s, now_s) + farm.run_s(h, job) for h in holders)
    return max(fluid_s, first_s)


def clear_s(
    queue: Queue, others: Sequence[tuple[float, float]], now_s: float, arriving: bool
) -> float:
    """When the other workers holding the queue's models (`others`, as `fluid.finish_s` takes
    them) are done with it, for the test of whether a lane loading it is useful: the fluid
    finish F of the queue as it stands, or, where `arriving` (`weigh` says so for an idle
    lane whose load evicts nothing while jobs still arrive), the end of the holders' busy
    period: with the queue's jobs arriving at
    rho times the rate the holders serve them, F / (1 - rho), never when rho >= 1. The rate
    is read from the waiting jobs themselves (every job that arrived after the oldest is still
    waiting behind it) and counted one standard error low: count - 1 - sqrt(count - 1)
    arrivals since the oldest, so two jobs that came close together show no rate at all.

    The queue as it stands keeps an idle worker waiting until the backlog has outgrown its
    load, while jobs pile up behind holders that cannot keep up: an H200 and two like cards
    reading checkpoints at 150 MiB/s (14 s for SD1.5), fresh, one checkpoint at 72 % load:
    the H200 loaded first and the others only after 16 s, mean latency 4.20 s against
    `least_outstanding`'s 3.01 (8 seeds); 3.13 with it. Only where the load evicts nothing
    (an empty worker, a free cache slot): on two H200s reading at 300 MiB/s over two
    checkpoints at 44 % load, a worker that evicted its own checkpoint in a busy period took
    the mean latency from 2.27 s to 3.27-8.37, whatever the rate read or the eviction priced
    (README, "Not built")."""
    finish = finish_s(others)
    span_s = now_s - queue.first.enqueued_at_s
    if not arriving or queue.count < 2 or span_s <= 0.0 or math.isinf(finish):
        return finish
    gaps = queue.count - 1
    served_per_s = queue.count * sum(1.0 / alone_s for _, alone_s in others)
    rho = (gaps - math.sqrt(gaps)) / span_s / served_per_s
    if rho >= 1.0:
        return math.inf
    return now_s + max(finish - now_s, 0.0) / (1.0 - rho)


def holders_finish_s(queue: Queue, farm: Farm) -> float:
    """When the workers holding the queue's models would finish it together (inf when none
    does): an upper bound on the gain of any other worker, whose help cannot make the queue
    done before now."""
    now_s = farm.now_s
    family, count, work_units = queue.first.family, queue.count, queue.work_units
    servers = []
    for holder in farm.holders(queue, ""):  # `alone_s` inline: once per queue and holder
        speed, fixed_s = farm.rate(holder, family)
        servers.append((max(holder.ready_s, now_s), count * fixed_s + work_units / speed))
    return finish_s(servers)


def queue_bound(queue: Queue, farm: Farm) -> float:
    """An upper bound on the `ratio` bound of `ratio_bounds` over every lane: no load, no
    fixed seconds, the whole queue run at the fastest speed for its family, and the highest
    comparative advantage (the fastest card's over the second; 1 for any other). inf where
    that reasoning does not hold."""
    fastest, advantage = farm.top_advantage.get(queue.first.family, (0.0, 1.0))
    if fastest <= 0.0 or queue.work_units <= 0.0:
        return math.inf
    waited_s = max(queue.count * farm.now_s - queue.enqueued_s_sum, 0.0)  # `Queue.waited_s`
    return (1.0 + waited_s * fastest / queue.work_units) * advantage


def queue_first_bound(queue: Queue, farm: Farm) -> float:
    """An upper bound on the `first_ratio` bound of `ratio_bounds` over every lane: with no
    load it is n (W + R) / R, at most n times `queue_bound`."""
    return queue.count * queue_bound(queue, farm)


def _warm_key(option: Option) -> tuple[float, float, float, float]:
    """Warm queues: the highest priority, then the oldest first job; but an idle worker
    choosing among jobs that all arrived while it sat idle (`Option.fresh`: none has waited
    on it) takes the one where it is most needed (`Option.gain_s`, as a load does: a queue
    no other worker holds first), then the oldest. A job that was waiting before the worker
    went idle comes before every fresh one."""
    first = -option.queue.first.enqueued_at_s
    if option.fresh:
        return (option.priority, 0.0, option.gain_s, first)
    return (option.priority, 1.0, first, 0.0)
