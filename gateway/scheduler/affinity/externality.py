"""What a load costs beyond its own seconds: the models it pushes out, the card it occupies."""

from __future__ import annotations

import math

from gateway.scheduler.affinity.context import Context
from gateway.scheduler.cost import evicted, key_load_s, models_of, run_s
from gateway.scheduler.lanes import Lane
from gateway.scheduler.snapshot import JobView


def _lost(lane: Lane, job: JobView) -> frozenset[str]:
    return evicted(lane.resident, models_of(job), lane.worker.cache_slots)


def eviction_cost_s(lane: Lane, job: JobView, away_s: float, ctx: Context) -> float:
    """Expected seconds of reloads caused by what loading `job`'s models pushes out of `lane`:
    each model nobody else holds, weighted by the chance it is needed soon (certain if a waiting
    job needs it, else from its recent arrival rate over the time away plus a horizon)."""
    total = 0.0
    for key in _lost(lane, job):
        if any(key in other.resident for other in ctx.lanes.values() if other.name != lane.name):
            continue
        rate = ctx.snapshot.demand_per_s.get(key, 0.0)
        soon = 1.0 - math.exp(-rate * (away_s + ctx.tuning.horizon_s))
        total += (1.0 if key in ctx.needed else soon) * key_load_s(lane.worker, key, "unknown")
    return total


def stay_value(lane: Lane, job: JobView, ctx: Context) -> float:
    """Jobs per second the lane would serve of the models that loading `job`'s pushes out, had
    it stayed: each model's recent arrival rate, shared with the other workers holding it."""
    total = 0.0
    for key in _lost(lane, job):
        copies = 1 + sum(key in o.resident for o in ctx.lanes.values() if o.name != lane.name)
        total += ctx.snapshot.demand_per_s.get(key, 0.0) / copies
    return total


def too_slow(lane: Lane, job: JobView, ctx: Context) -> bool:
    """Whether another eligible card runs `job` `slow_ratio` times faster: then this card never
    loads it (that card will, once the job's ratio beats its warm work). No age override: one
    would load slow cards exactly when capacity is scarcest."""
    mine = run_s(job, lane.worker)
    return any(ctx.tuning.slow_ratio * run_s(job, o.worker) <= mine for o in ctx.others(lane, job))


def advantage(lane: Lane, job: JobView, ctx: Context) -> float:
    """How many times faster this card runs `job` than the fastest other eligible card."""
    others = [run_s(job, o.worker) for o in ctx.others(lane, job)]
    if not ctx.tuning.advantage or not others:
        return 1.0
    return min(others) / run_s(job, lane.worker)


def better_loader(lane: Lane, job: JobView, load_s: float, ctx: Context) -> bool:
    """Whether another worker with no warm work of its own, not much slower for `job` and free
    before this one would finish it, gives up less by leaving what it holds (so the workers
    holding hot models stay put and the others do the rotating)."""
    mine = stay_value(lane, job, ctx)
    my_run = run_s(job, lane.worker)
    by_s = max(lane.ready_s, ctx.now_s) + load_s + my_run
    return any(
        other.ready_s <= by_s
        and other.name not in ctx.warm_work
        and run_s(job, other.worker) < ctx.tuning.slow_ratio * my_run
        and stay_value(other, job, ctx) + 1e-9 < mine
        for other in ctx.others(lane, job)
    )
