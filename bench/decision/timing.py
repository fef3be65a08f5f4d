"""Timing one policy's calls on one snapshot: enough calls for a p99, a cap on a runaway call."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import gateway.scheduler  # noqa: F401  (registers the policies)
from bench.deadline import Overrun, deadline
from bench.decision.snapshots import CASES, Size, build_snapshot
from gateway.scheduler.policy import Policy, make_policy
from gateway.scheduler.snapshot import Snapshot

POLICIES = ("affinity", "swarm_like", "ect_greedy")


@dataclass(frozen=True)
class Budget:
    """How long to time one row: until `max_reps` calls, or `budget_s` once `min_reps` ran;
    a call still running at `cap_s` is cut (its row then shows a lower bound)."""

    min_reps: int = 100
    max_reps: int = 2_000
    budget_s: float = 1.0
    cap_s: float = 20.0


QUICK_BUDGET = Budget(min_reps=3, max_reps=20, budget_s=0.05, cap_s=5.0)


@dataclass(frozen=True)
class Row:
    case: str
    size: Size
    policy: str
    groups: int
    shown: int
    """Jobs in the snapshot's `jobs` (the groups' heads)."""
    placed: int
    """Assignments of one call."""
    samples_ms: tuple[float, ...]
    cut: bool
    """The first call was still running at the cap: its one sample is a lower bound."""

    def pct_ms(self, q: float) -> float:
        return float(np.percentile(self.samples_ms, q, method="higher"))


def _timed_ms(policy: Policy, snapshot: Snapshot) -> tuple[float, int]:
    began = time.perf_counter_ns()
    placed = len(policy.assign(snapshot))
    return (time.perf_counter_ns() - began) / 1e6, placed


def measure(policy: Policy, snapshot: Snapshot, budget: Budget) -> tuple[list[float], int, bool]:
    """Milliseconds of each call, the assignments of one call, and whether the only call was
    cut at the cap (its milliseconds so far are then the one sample, a lower bound).

    The first call warms up and is not counted unless it took `budget_s` or more (then every
    call counts); no call starts that would, at the last call's pace, end past the cap."""
    samples: list[float] = []
    began_s = time.perf_counter()
    try:
        with deadline(budget.cap_s):
            first_ms, placed = _timed_ms(policy, snapshot)
            if first_ms >= 1000.0 * budget.budget_s:
                samples.append(first_ms)
            while len(samples) < budget.max_reps and _more(samples, began_s, first_ms, budget):
                samples.append(_timed_ms(policy, snapshot)[0])
    except Overrun:
        if samples:  # the cap passed during a call: that call is left out
            return samples, placed, False
        return [1000.0 * (time.perf_counter() - began_s)], 0, True
    return samples, placed, False


def _more(samples: Sequence[float], began_s: float, first_ms: float, budget: Budget) -> bool:
    elapsed_s = time.perf_counter() - began_s
    if len(samples) >= budget.min_reps and elapsed_s >= budget.budget_s:
        return False
    last_s = (samples[-1] if samples else first_ms) / 1000.0
    return elapsed_s + last_s <= budget.cap_s


def time_row(case: str, size: Size, name: str, snapshot: Snapshot, budget: Budget) -> Row:
    gc.collect()
    samples, placed, cut = measure(make_policy(name), snapshot, budget)
    return Row(
        case=case,
        size=size,
        policy=name,
        groups=len(snapshot.groups),
        shown=len(snapshot.jobs),
        placed=placed,
        samples_ms=tuple(samples),
        cut=cut,
    )


def run_rows(
    sizes: Sequence[Size], policies: Sequence[str], budget: Budget, cases: Sequence[str] = CASES
) -> list[Row]:
    """Every (case, size) snapshot timed under every policy, printed as it goes."""
    rows: list[Row] = []
    for case in cases:
        for size in sizes:
            snapshot = build_snapshot(case, size)
            for name in policies:
                row = time_row(case, size, name, snapshot, budget)
                p99 = f"{row.pct_ms(99):.3f}"
                print(f"{case:6} {size.label:>22} {name:12} p99 {p99} ms", file=sys.stderr)
                rows.append(row)
    return rows
