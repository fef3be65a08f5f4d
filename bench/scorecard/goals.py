"""Ours against the best baseline of each cell, and the scorecard's goals (issue 9, "A
scorecard over regimes, not one scenario"). Pure functions over the mean of a cell's seeds.

A ratio is ours relative to another policy with lower-is-better metrics inverted, so >= 1 means
ours is at least as good: best / ours for latency and makespan, ours / best for goodput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.scorecard.grid import Cell

OURS = "affinity"
BASELINES = ("round_robin", "least_outstanding", "ect_greedy", "swarm_like", "affinity_only")
SWARM = "swarm_like"
FLOOR = 0.97
"""Every cell: ours / best baseline at least this on latency, makespan and goodput."""
SWARM_FACTOR = 1.25
"""Mixed-farm cells at >= 50 % load or with >= 100-job batches: ours / swarm_like on the
cell's headline metric (`swarm_metric`) at least this."""
SWARM_MIN_LOAD = 0.5
SWARM_MIN_BATCH = 100
LOADS_SLACK = 2.0
"""Every cell: ours at most the reference baseline's loads per 100 jobs plus this. The
reference (`loads_reference`) is the thriftiest baseline among those that meet the floor on
the cell's headline metric themselves (within FLOOR of the best baseline): a baseline that
saves loads by serving more than 3 % worse is a schedule the floor goal forbids ours to copy,
so it cannot set the loads bar. The thriftiest baseline of all is shown beside it."""

Means = Mapping[str, Mapping[str, float]]
"""Policy -> row key -> mean over the cell's seeds (a policy whose run was cut is absent)."""


@dataclass(frozen=True)
class Metric:
    key: str
    """The `Summary` field (a row key)."""
    label: str
    lower_better: bool


MEAN = Metric("mean_s", "mean latency", True)
P95 = Metric("p95_s", "p95 latency", True)
MAKESPAN = Metric("round_makespan_s", "makespan", True)
GOODPUT = Metric("goodput_per_s", "goodput", False)
LOADS = Metric("loads_per_100", "loads / 100 jobs", True)
METRICS = (MEAN, P95, MAKESPAN, GOODPUT)


def ratio(ours: float, other: float, lower_better: bool) -> float:
    """Ours relative to `other`, >= 1 when ours is at least as good (inf and 0 allowed)."""
    if ours == other or (math.isnan(ours) and math.isnan(other)):
        return 1.0
    good, ref = (other, ours) if lower_better else (ours, other)
    if math.isnan(good) or math.isnan(ref):
        return float("nan")
    if ref == 0:
        return float("inf")
    if math.isinf(good) and math.isinf(ref):
        return 1.0
    return good / ref


def metrics_of(cell: Cell) -> tuple[Metric, ...]:
    """What the cell is judged on: latency and goodput, and makespan for batches and bursts."""
    if cell.shape.kind == "batch" or cell.shape.burst > 1:
        return METRICS
    return tuple(m for m in METRICS if m is not MAKESPAN)


def headline(cell: Cell) -> Metric:
    """The cell's main metric: makespan for a batch, mean latency otherwise."""
    return MAKESPAN if cell.shape.kind == "batch" else MEAN


def swarm_metric(cell: Cell) -> Metric | None:
    """The metric on which the cell must beat swarm_like by SWARM_FACTOR (makespan for a batch,
    mean latency under load), or None where that goal does not apply."""
    if not cell.farm.mixed:
        return None
    shape = cell.shape
    if shape.kind == "batch" and shape.jobs[0] >= SWARM_MIN_BATCH:
        return MAKESPAN
    if shape.kind == "load" and shape.load >= SWARM_MIN_LOAD:
        return MEAN
    return None


@dataclass(frozen=True)
class Score:
    metric: Metric
    ours: float
    best_policy: str
    best: float
    ratio: float
    """Ours / the best baseline (inverted where lower is better)."""
    swarm: float
    swarm_ratio: float


def best_baseline(means: Means, metric: Metric, baselines: Sequence[str]) -> tuple[str, float]:
    """The baseline with the best value of `metric` (first in `baselines` on a tie)."""
    values = [(p, means[p][metric.key]) for p in baselines if p in means]
    values = [(p, v) for p, v in values if not math.isnan(v)]
    if not values:
        return "-", float("nan")
    sign = 1.0 if metric.lower_better else -1.0
    return min(values, key=lambda pv: sign * pv[1])


def loads_reference(means: Means, cell: Cell, baselines: Sequence[str]) -> tuple[str, float]:
    """The baseline whose loads per 100 jobs set the loads goal: the fewest loads among the
    baselines within FLOOR of the best baseline on the cell's headline metric."""
    metric = headline(cell)
    _, best = best_baseline(means, metric, baselines)
    peers = [
        (p, means[p][LOADS.key])
        for p in baselines
        if p in means and ratio(means[p][metric.key], best, metric.lower_better) >= FLOOR
    ]
    return min(peers, key=lambda pv: pv[1], default=("-", float("nan")))


def swarm_target(cell: Cell, swarm: float, bound_s: float) -> float:
    """What ours / swarm_like must reach: SWARM_FACTOR, capped on a batch by what its lower
    bound allows (a schedule within FLOOR of the bound, FLOOR x swarm_like / bound)."""
    if cell.shape.kind != "batch" or not bound_s > 0 or math.isnan(swarm):
        return SWARM_FACTOR
    return min(SWARM_FACTOR, FLOOR * swarm / bound_s)


def score(means: Means, metric: Metric, baselines: Sequence[str] = BASELINES) -> Score:
    nan = float("nan")
    ours = means[OURS][metric.key] if OURS in means else nan
    name, best = best_baseline(means, metric, baselines)
    swarm = means[SWARM][metric.key] if SWARM in means else nan
    return Score(
        metric=metric,
        ours=ours,
        best_policy=name,
        best=best,
        ratio=ratio(ours, best, metric.lower_better) if OURS in means else 0.0,
        swarm=swarm,
        swarm_ratio=ratio(ours, swarm, metric.lower_better) if OURS in means else 0.0,
    )


@dataclass(frozen=True)
class Judged:
    cell: Cell
    scores: tuple[Score, ...]
    loads: Score
    swarm_goal: Metric | None
    failures: tuple[str, ...]
    thriftiest: tuple[str, float] = ("-", float("nan"))
    """The baseline with the fewest loads per 100 jobs, whatever its latency (shown beside the
    reference of the loads goal: it may be one that never loads and queues instead)."""
    bound_s: float = float("nan")
    """A batch's lower bound on the makespan (`bench.sim.bounds`); nan for other shapes."""
    swarm_target: float = SWARM_FACTOR
    """What ours / swarm_like must reach on `swarm_goal` (`swarm_target`)."""
    planner_s: float = float("nan")
    """The offline planner's makespan of a batch (`runner.planned_s`), nan where none ran:
    evidence beside the goals, not a goal (it is no bound)."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def of(self, metric: Metric) -> Score | None:
        return next((s for s in self.scores if s.metric == metric), None)


def failures(
    scores: Sequence[Score], loads: Score, swarm_goal: Metric | None, target: float
) -> list[str]:
    """Each goal the cell misses, as a short sentence."""
    out = [
        f"{s.metric.label} {s.ratio:.3f}x the best baseline ({s.best_policy}), want >= {FLOOR}"
        for s in scores
        if not s.ratio >= FLOOR
    ]
    headline = next((s for s in scores if s.metric == swarm_goal), None)
    if headline is not None and not headline.swarm_ratio >= target:
        out.append(
            f"{headline.metric.label} {headline.swarm_ratio:.3f}x swarm_like, want >= {target:.3g}"
        )
    if not loads.ours <= loads.best + LOADS_SLACK:
        out.append(
            f"loads/100 {loads.ours:.1f} against {loads.best:.1f} ({loads.best_policy}), "
            f"want <= reference + {LOADS_SLACK:g}"
        )
    return out


def judge(cell: Cell, means: Means, baselines: Sequence[str] = BASELINES) -> Judged:
    scores = tuple(score(means, metric, baselines) for metric in metrics_of(cell))
    reference = loads_reference(means, cell, baselines)
    loads = score(means, LOADS, [reference[0]])
    goal = swarm_metric(cell)
    bound = lower_bound_s(cell, means)
    swarm = means[SWARM][MAKESPAN.key] if SWARM in means else float("nan")
    target = swarm_target(cell, swarm, bound)
    missed = failures(scores, loads, goal, target)
    if OURS not in means:
        missed.insert(0, "ours did not finish (run cut)")
    thriftiest = best_baseline(means, LOADS, baselines)
    planner = means[OURS].get("planner_s", math.nan) if OURS in means else math.nan
    return Judged(cell, scores, loads, goal, tuple(missed), thriftiest, bound, target, planner)


def lower_bound_s(cell: Cell, means: Means) -> float:
    """The batch's lower bound on the makespan (the same for every policy), else nan."""
    if cell.shape.kind != "batch":
        return float("nan")
    return next((m["lower_bound_s"] for m in means.values() if "lower_bound_s" in m), math.nan)


Row = Mapping[str, object]


def mean_over_seeds(rows: Iterable[Row], keys: Sequence[str]) -> dict[str, dict[str, float]]:
    """Policy -> key -> mean over its rows (the keys every row has); a policy with a cut run
    is left out."""
    by_policy: dict[str, list[Row]] = {}
    for row in rows:
        by_policy.setdefault(str(row["policy"]), []).append(row)
    return {
        policy: _means(prows, keys)
        for policy, prows in by_policy.items()
        if not any(r.get("cut") for r in prows)
    }


def _means(rows: Sequence[Row], keys: Sequence[str]) -> dict[str, float]:
    present = [key for key in keys if all(key in r for r in rows)]
    return {key: float(np.mean([float(str(r[key])) for r in rows])) for key in present}
