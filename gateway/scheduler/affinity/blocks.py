"""Blocks: the share of one model's queue a worker would serve next, and whether to load it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.scheduler.affinity.context import Context, Groups, holders_of
from gateway.scheduler.affinity.externality import (
    advantage,
    better_loader,
    eviction_cost_s,
    stay_value,
    too_slow,
)
from gateway.scheduler.cost import can_run, evicted, is_warm, load_s, models_of, run_s
from gateway.scheduler.lanes import Lane
from gateway.scheduler.share import water_fill
from gateway.scheduler.snapshot import JobView


@dataclass(frozen=True)
class Block:
    jobs: tuple[JobView, ...]
    warm: bool
    load_s: float
    evict_s: float
    run_s: float
    waited_s: float
    advantage: float
    theirs_s: float = math.inf
    """When the workers already holding the model would have finished the first job."""

    @property
    def head(self) -> JobView:
        return self.jobs[0]

    @property
    def cost_s(self) -> float:
        return self.load_s + self.evict_s + self.run_s

    def ratio(self) -> float:
        """Response ratio of the block with its load in it, (waited + cost) / cost, scaled by
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
    start_s = max(lane.ready_s, ctx.now_s) + load
    share = water_fill(
        lane, holders_of(lane, head, ctx), mine, start_s, ctx.tuning.switch_margin * load
    )
    if not share.jobs:
        return None
    run = sum(run_s(job, lane.worker) for job in share.jobs)
    evict = 0.0 if warm else eviction_cost_s(lane, head, load + run, ctx)
    waited = sum(ctx.now_s - job.enqueued_at_s for job in share.jobs)
    adv = advantage(lane, head, ctx)
    return Block(share.jobs, warm, load, evict, run, waited, adv, share.theirs_s)


def rate_index(block: Block, ctx: Context) -> float:
    """Weighted jobs per second of worker time the block yields."""
    total = sum(
        1.0 + (ctx.now_s - job.enqueued_at_s) / ctx.tuning.age_scale_s for job in block.jobs
    )
    return total / block.cost_s * block.advantage


def held_back(block: Block, ctx: Context) -> bool:
    """Whether a small block that evicts something needed should wait for company: its oldest
    job has waited less than the hold, or a worker holding the model will serve it by then.
    Where such blocks are most of the queue, it waits only for `hold_patience` instead."""
    tuning = ctx.tuning
    if block.evict_s <= 0.0 or len(block.jobs) >= tuning.hold_jobs:
        return False
    if ctx.small_share > tuning.hold_share:
        return block.waited_s < tuning.hold_patience * (block.load_s + block.evict_s)
    hold_s = min(tuning.hold_s, tuning.hold_backlog * ctx.backlog_s)
    if math.isinf(block.theirs_s):
        return ctx.now_s - block.head.enqueued_at_s < hold_s
    return block.theirs_s - ctx.now_s <= hold_s


def worth_loading(lane: Lane, block: Block, ctx: Context) -> bool:
    """The gates every load passes: enough waiting to pay for it (where waiting can gain
    anything), a card not much slower than another for it, and no small block that should wait
    for company."""
    if gains_by_waiting(lane, block) and block.waited_s < ctx.tuning.patience * (
        block.load_s + block.evict_s
    ):
        return False
    return not too_slow(lane, block.head, ctx) and not held_back(block, ctx)


def gains_by_waiting(lane: Lane, block: Block) -> bool:
    """Whether leaving the load for later can save anything: a worker holding the model may
    serve the block, or the load would evict a model. Otherwise (a first use on an idle card
    with room) the load is paid anyway, and waiting only adds its delay."""
    holder = not math.isinf(block.theirs_s)
    return holder or bool(evicted(lane.resident, models_of(block.head), lane.worker.cache_slots))


def may_load(lane: Lane, block: Block, warm: Block | None, ctx: Context) -> bool:
    """Whether `lane` should pay a load for `block` now rather than do `warm` (or idle)."""
    if not worth_loading(lane, block, ctx):
        return False
    if not evicted(lane.resident, models_of(block.head), lane.worker.cache_slots):
        # Room in the cache: the load costs its own seconds and nothing else.
        return warm is None or block.ratio() > warm.ratio()
    if ctx.tuning.defer and better_loader(lane, block.head, block.load_s, ctx):
        return False
    if warm is not None:
        return block.ratio() > ctx.tuning.switch_ratio * warm.ratio()
    return rate_index(block, ctx) > ctx.tuning.stay_weight * stay_value(lane, block.head, ctx)


def choose(lane: Lane, groups: Groups, ctx: Context) -> JobView | None:
    """The next job for `lane` from the most urgent block it may load, else from its best warm
    block (the one among the oldest it is relatively best at); None to leave it idle."""
    blocks = [b for jobs in groups.values() if jobs and (b := block_for(lane, jobs, ctx))]
    warm = max((b for b in blocks if b.warm), key=Block.key, default=None)
    cold = [b for b in blocks if not b.warm and may_load(lane, b, warm, ctx)]
    best = max(cold, key=Block.key, default=warm)
    if best is None:
        return None
    window = best.jobs[: ctx.tuning.pick_window]
    return max(window, key=lambda job: advantage(lane, job, ctx) - 1e-6 * window.index(job))
