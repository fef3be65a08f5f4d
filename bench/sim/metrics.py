"""What one simulated run achieved: latency, goodput, loads, GPU time split, stability."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.sim.engine import RunResult

SLO_FACTOR = 2.0
SLO_SLACK_S = 10.0
STABLE_GROWTH = 0.02
"""A run is unstable when more than this fraction of the second half's arrivals pile up."""


@dataclass(frozen=True)
class Summary:
    jobs: int
    finished: int
    diverged: bool
    span_s: float
    throughput_per_s: float
    mean_s: float
    p50_s: float
    p95_s: float
    p99_s: float
    mean_slowdown: float
    good_fraction: float
    goodput_per_s: float
    loads_per_100: float
    run_fraction: float
    load_fraction: float
    idle_fraction: float
    growth: float
    stable: bool
    makespan_s: float
    round_makespan_s: float
    """Mean over the sets of jobs that arrived together (a batch, a round of a burst, a lone
    job) of the seconds from their arrival to the last one's finish."""


def backlog_growth(arrivals: np.ndarray, ends: np.ndarray) -> float:
    """Jobs that piled up between the middle and the end of the arrival window, as a fraction of
    the arrivals in between (0 for a stable queue, the overload fraction for an unstable one)."""
    if len(arrivals) < 20:
        return 0.0
    last = float(arrivals[-1])
    ends_sorted = np.sort(ends)

    def backlog(lo: float, hi: float) -> float:
        at = arrivals[(arrivals >= lo) & (arrivals <= hi)]
        if len(at) == 0:
            return 0.0
        arrived = np.searchsorted(arrivals, at, side="right")
        done = np.searchsorted(ends_sorted, at, side="right")
        return float(np.mean(arrived - done))

    mid, end = backlog(0.4 * last, 0.5 * last), backlog(0.9 * last, last)
    between = np.count_nonzero((arrivals > 0.45 * last) & (arrivals <= 0.95 * last))
    return (end - mid) / max(int(between), 1)


def round_makespan(arrivals: np.ndarray, ends: np.ndarray) -> float:
    """Mean makespan of the sets of jobs sharing an arrival time (inf if one never finished)."""
    times, which = np.unique(arrivals, return_inverse=True)
    last = np.full(len(times), -np.inf)
    np.maximum.at(last, which, ends)
    return float(np.mean(last - times))


def summarise(result: RunResult, warm_best: Sequence[float]) -> Summary:
    records = result.records
    arrivals = np.array([r.job.arrival_s for r in records])
    ends = np.array([r.end_s if r.end_s == r.end_s else np.inf for r in records])
    done = np.isfinite(ends)
    if result.diverged:
        done &= ends <= result.end_s + 1e-9
    ends = np.where(done, ends, np.inf)
    latency = ends - arrivals
    best = np.array(warm_best)
    good = latency <= SLO_FACTOR * best + SLO_SLACK_S
    start = float(arrivals.min())
    finish = float(ends[done].max()) if done.any() else start
    span = max(finish, float(arrivals.max()), result.end_s if result.diverged else 0.0) - start
    busy_run = sum(w.run_total_s for w in result.workers)
    busy_load = sum(w.load_total_s for w in result.workers)
    gpu_s = max(span, 1e-9) * len(result.workers)
    loads = sum(w.loads for w in result.workers)
    growth = backlog_growth(np.sort(arrivals), ends)
    return Summary(
        jobs=len(records),
        finished=int(done.sum()),
        diverged=result.diverged,
        span_s=span,
        throughput_per_s=int(done.sum()) / max(span, 1e-9),
        mean_s=float(np.mean(latency)) if done.all() else float("inf"),
        p50_s=_pct(latency, 50),
        p95_s=_pct(latency, 95),
        p99_s=_pct(latency, 99),
        mean_slowdown=_mean_slowdown(latency, best),
        good_fraction=float(good.mean()),
        goodput_per_s=float(good.sum()) / max(span, 1e-9),
        loads_per_100=100.0 * loads / max(int(done.sum()), 1),
        run_fraction=busy_run / gpu_s,
        load_fraction=busy_load / gpu_s,
        idle_fraction=max(1.0 - (busy_run + busy_load) / gpu_s, 0.0),
        growth=growth,
        stable=not result.diverged and growth < STABLE_GROWTH,
        makespan_s=finish - start,
        round_makespan_s=round_makespan(arrivals, ends),
    )


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q, method="nearest"))


def _mean_slowdown(latency: np.ndarray, best: np.ndarray) -> float:
    finite = np.isfinite(latency)
    return float(np.mean(latency[finite] / best[finite])) if finite.any() else 0.0
