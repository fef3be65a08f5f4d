"""`affinity` (the default): late binding on model affinity weighted by measured speed.

When workers have free slots, each, in the order they free, takes the best block of one model's
waiting jobs for it, or stays idle. Everything is in seconds:

- A block is the share of one model's queue the worker would serve (`share.water_fill`): the
  jobs it finishes before every worker already holding that model would, by at least the load
  it must pay first. So a job is left to a clearly faster or already warm worker, a hot model
  gets a second copy exactly when its queue outgrows its warm copies, and a burst is split
  across workers as a whole.
- Its value is a response ratio with the load in it: the summed weight of the block's jobs
  (1 + wait / age_scale_s each) per second of worker time (load + eviction cost + warm runs).
  Warm work has no load, so it wins until a cold model's jobs have waited long enough, together,
  to be worth a load; under heavy load queues grow, blocks grow and each load serves more jobs,
  which is what keeps the farm stable (an age cap that forces the oldest job first does not).
- A cold load waits until the block's summed wait covers `patience` x its load (plus the cost
  of evicting what others will need), waives nothing for a card `slow_ratio` times slower than
  another for that family unless the job has waited `slow_wait` times that card's cold cost.
- The eviction cost counts each model pushed out that nobody else holds, weighted by the chance
  it is needed soon: certain if a waiting job needs it, else from its recent arrival rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.scheduler.cost import (
    can_run,
    evicted,
    is_warm,
    key_load_s,
    load_s,
    models_of,
    run_s,
)
from gateway.scheduler.lanes import Lane, advance, lanes_of, mean_speed
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.share import water_fill
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot


@dataclass(frozen=True)
class Tuning:
    age_scale_s: float = 10.0
    """A job's weight grows by 1 for every this many seconds it has waited."""
    switch_ratio: float = 2.0
    """A worker with warm work pays a load only for a block whose response ratio (load
    included) is this many times that of its best warm block. Ratios, not absolute ages, so
    under heavy load the switches thin out instead of turning into first come, first served."""
    switch_margin: float = 1.0
    """A worker that must load a model wins a job only if it finishes it this many load times
    sooner than the workers already holding the model."""
    patience: float = 1.0
    """A cold load waits until its jobs' summed wait reaches this many times its cost."""
    hold_s: float = 0.0
    """A cold load of fewer than `hold_jobs` jobs waits until its oldest has waited this long,
    so a rare model's jobs share one load (the wait stays well inside a useful latency)."""
    hold_jobs: int = 1_000_000
    slow_ratio: float = 2.0
    """A card this many times slower than another for a job's family does not cold-load it..."""
    slow_wait: float = 3.0
    defer: bool = True
    """Leave a cold load to a worker that frees in time and gives up less by leaving its model."""
    """...until the job has waited this many times that card's own cold cost."""
    stay_weight: float = 1.0
    """A worker leaves a model for a cold block only if the block's value exceeds this many
    times the rate of that model's jobs it would serve by staying."""
    horizon_s: float = 10.0
    """How far ahead the demand for an evicted model counts."""
    group_limit: int = 64
    advantage: bool = True
    """Scale a block's value by how much faster this card runs it than the next best card,
    so each card favours the work it is relatively best at (comparative advantage)."""
    """Jobs considered per model (the oldest)."""


@dataclass(frozen=True)
class Context:
    """What every option of one call shares."""

    snapshot: Snapshot
    lanes: Mapping[str, Lane]
    needed: frozenset[str]
    """Model keys some waiting job needs."""
    warm_work: frozenset[str]
    """Workers for which some waiting job is warm (they have their own work to do)."""
    tuning: Tuning


def groups_of(jobs: Sequence[JobView]) -> dict[frozenset[str], list[JobView]]:
    """Waiting jobs by the model keys they need, each list in queue order."""
    groups: dict[frozenset[str], list[JobView]] = {}
    for job in jobs:
        groups.setdefault(models_of(job), []).append(job)
    return groups


def weight(job: JobView, ctx: Context) -> float:
    return 1.0 + (ctx.snapshot.now_s - job.enqueued_at_s) / ctx.tuning.age_scale_s


def eviction_cost_s(lane: Lane, job: JobView, away_s: float, ctx: Context) -> float:
    """Expected seconds of reloads caused by what loading `job`'s models pushes out of `lane`."""
    total = 0.0
    for key in evicted(lane.resident, models_of(job), lane.worker.cache_slots):
        if any(key in other.resident for other in ctx.lanes.values() if other.name != lane.name):
            continue
        rate = ctx.snapshot.demand_per_s.get(key, 0.0)
        chance = (
            1.0 if key in ctx.needed else 1.0 - math.exp(-rate * (away_s + ctx.tuning.horizon_s))
        )
        total += chance * key_load_s(lane.worker, key, "unknown")
    return total


def stay_value(lane: Lane, job: JobView, ctx: Context) -> float:
    """Jobs per second the lane would serve of the models that loading `job`'s pushes out, had
    it stayed: each model's recent arrival rate, shared with the other workers holding it."""
    total = 0.0
    for key in evicted(lane.resident, models_of(job), lane.worker.cache_slots):
        copies = 1 + sum(key in o.resident for o in ctx.lanes.values() if o.name != lane.name)
        total += ctx.snapshot.demand_per_s.get(key, 0.0) / copies
    return total


def too_slow(lane: Lane, job: JobView, cold_s: float, ctx: Context) -> bool:
    """Whether `lane` should leave a cold job to a much faster card for its family."""
    mine = run_s(job, lane.worker)
    fastest = min(
        (run_s(job, o.worker) for o in ctx.lanes.values() if can_run(job, o.worker)),
        default=mine,
    )
    if mine < ctx.tuning.slow_ratio * fastest:
        return False
    return ctx.snapshot.now_s - job.enqueued_at_s < ctx.tuning.slow_wait * cold_s


def advantage(lane: Lane, job: JobView, ctx: Context) -> float:
    """How many times faster this card runs `job` than the fastest other eligible card."""
    if not ctx.tuning.advantage:
        return 1.0
    others = [
        run_s(job, o.worker)
        for o in ctx.lanes.values()
        if o.name != lane.name and can_run(job, o.worker)
    ]
    return min(others) / run_s(job, lane.worker) if others else 1.0


def better_loader(lane: Lane, job: JobView, load: float, ctx: Context) -> bool:
    """Whether another worker, as able to load `job`'s models and free before this one would
    finish it, gives up less by leaving what it holds (so the hot models stay put)."""
    mine = stay_value(lane, job, ctx)
    my_run = run_s(job, lane.worker)
    by_s = max(lane.ready_s, ctx.snapshot.now_s) + load + my_run
    for other in ctx.lanes.values():
        if other.name == lane.name or not can_run(job, other.worker):
            continue
        if other.ready_s > by_s or other.name in ctx.warm_work:
            continue
        if run_s(job, other.worker) >= ctx.tuning.slow_ratio * my_run:
            continue
        if stay_value(other, job, ctx) + 1e-9 < mine:
            return True
    return False


def holders_of(lane: Lane, job: JobView, ctx: Context) -> list[Lane]:
    return [
        other
        for other in ctx.lanes.values()
        if other.name != lane.name and can_run(job, other.worker) and is_warm(job, other.resident)
    ]


@dataclass(frozen=True)
class Block:
    """The share of one model's queue a worker would serve next, with what it costs there."""

    jobs: tuple[JobView, ...]
    warm: bool
    load_s: float
    evict_s: float
    run_s: float
    waited_s: float
    advantage: float

    @property
    def head(self) -> JobView:
        return self.jobs[0]

    @property
    def cost_s(self) -> float:
        return self.load_s + self.evict_s + self.run_s

    def ratio(self) -> float:
        """Response ratio of the block, its load included: (waited + cost) / cost, scaled by
        the card's comparative advantage for it."""
        return (self.waited_s + self.cost_s) / self.cost_s * self.advantage

    def key(self) -> tuple[int, float]:
        return (self.head.priority, self.ratio())


def block_for(lane: Lane, jobs: Sequence[JobView], ctx: Context) -> Block | None:
    """The block of this model's queue that `lane` would serve; None if it should serve none."""
    mine = [job for job in jobs if can_run(job, lane.worker)][: ctx.tuning.group_limit]
    if not mine:
        return None
    head = mine[0]
    warm = is_warm(head, lane.resident)
    load = 0.0 if warm else load_s(head, lane.worker, lane.resident)
    start_s = max(lane.ready_s, ctx.snapshot.now_s) + load
    margin_s = ctx.tuning.switch_margin * load
    jobs_served = water_fill(lane, holders_of(lane, head, ctx), mine, start_s, margin_s)
    if not jobs_served:
        return None
    run = sum(run_s(job, lane.worker) for job in jobs_served)
    evict = 0.0 if warm else eviction_cost_s(lane, head, load + run, ctx)
    waited = sum(ctx.snapshot.now_s - job.enqueued_at_s for job in jobs_served)
    adv = advantage(lane, head, ctx)
    return Block(jobs_served, warm, load, evict, run, waited, adv)


def rate_index(block: Block, ctx: Context) -> float:
    """Weighted jobs per second of worker time the block yields."""
    total = sum(weight(job, ctx) for job in block.jobs)
    return total / block.cost_s * block.advantage


def may_load(lane: Lane, block: Block, warm: Block | None, ctx: Context) -> bool:
    """Whether `lane` should pay a load for `block` now rather than do `warm` (or idle)."""
    tuning = ctx.tuning
    head = block.head
    if block.waited_s < tuning.patience * (block.load_s + block.evict_s):
        return False
    held = ctx.snapshot.now_s - head.enqueued_at_s < tuning.hold_s
    if held and len(block.jobs) < tuning.hold_jobs:
        return False
    if too_slow(lane, head, block.load_s + run_s(head, lane.worker), ctx):
        return False
    if tuning.defer and better_loader(lane, head, block.load_s, ctx):
        return False
    if warm is not None:
        return block.ratio() > tuning.switch_ratio * warm.ratio()
    return rate_index(block, ctx) > tuning.stay_weight * stay_value(lane, head, ctx)


def choose(
    lane: Lane, groups: Mapping[frozenset[str], list[JobView]], ctx: Context
) -> JobView | None:
    """The next job for `lane`: the oldest of the most urgent cold block it may load, else of
    its best warm block; None to leave it idle."""
    blocks = [b for jobs in groups.values() if jobs and (b := block_for(lane, jobs, ctx))]
    warm = max((b for b in blocks if b.warm), key=Block.key, default=None)
    cold = [b for b in blocks if not b.warm and may_load(lane, b, warm, ctx)]
    best = max(cold, key=Block.key, default=warm)
    return best.head if best is not None else None


def next_lane(lanes: Mapping[str, Lane], done: set[str]) -> Lane | None:
    """The lane with a free slot that frees first (the faster card on a tie)."""
    open_lanes = [lane for lane in lanes.values() if lane.slots > 0 and lane.name not in done]
    return min(
        open_lanes,
        key=lambda lane: (lane.ready_s, -mean_speed(lane.worker), lane.name),
        default=None,
    )


@dataclass(frozen=True)
class AffinityPolicy:
    tuning: Tuning = Tuning()
    name: str = "affinity"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        lanes = lanes_of(snapshot)
        groups = groups_of(snapshot.jobs)
        needed = frozenset(key for models in groups for key in models)
        warm_work = frozenset(
            lane.name
            for lane in lanes.values()
            if any(jobs and is_warm(jobs[0], lane.resident) for jobs in groups.values())
        )
        done: set[str] = set()
        out: list[Assignment] = []
        while (lane := next_lane(lanes, done)) is not None:
            ctx = Context(snapshot, lanes, needed, warm_work, self.tuning)
            job = choose(lane, groups, ctx)
            if job is None:
                done.add(lane.name)
                continue
            groups[models_of(job)].remove(job)
            lanes = {**lanes, lane.name: advance(lane, job)}
            out.append(Assignment(job.job_id, lane.name))
        return out


@register("affinity")
def make_affinity() -> Policy:
    return AffinityPolicy()
