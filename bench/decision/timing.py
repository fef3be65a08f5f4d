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
from gateway.dispatch.dispatcher import collections_deferred, is_large
from gateway.scheduler.policy import Policy, Stepwise, make_policy
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
    """Wall-clock milliseconds of each call: what a caller waits, preemption included."""
    cpu_samples_ms: tuple[float, ...]
    """CPU milliseconds of this thread during each call: what the placement itself costs,
    whatever else the machine runs."""
    cut: bool
    """The first call was still running at the cap: its one sample is a lower bound."""
    gap_samples_ms: tuple[float, ...] = ()
    """For a stepwise policy: CPU milliseconds from a call's start to its first assignment
    and between two assignments, over every timed call: what a job waits on once the job
    before it is placed, since the dispatcher sends each as it is made
    (`gateway.dispatch.dispatcher.decisions`). Empty for the others."""
    first_samples_ms: tuple[float, ...] = ()
    """For a stepwise policy: CPU milliseconds from each call's start to its first assignment."""

    def pct_ms(self, q: float) -> float:
        """The q-th percentile of the wall-clock samples."""
        return float(np.percentile(self.samples_ms, q, method="higher"))

    def cpu_pct_ms(self, q: float) -> float:
        """The q-th percentile of the CPU samples."""
        return float(np.percentile(self.cpu_samples_ms, q, method="higher"))

    def gap_pct_ms(self, q: float) -> float | None:
        """The q-th percentile of the CPU milliseconds per assignment (None: not stepwise)."""
        if not self.gap_samples_ms:
            return None
        return float(np.percentile(self.gap_samples_ms, q, method="higher"))

    def first_pct_ms(self, q: float) -> float | None:
        """The q-th percentile of the CPU milliseconds to the first assignment."""
        if not self.first_samples_ms:
            return None
        return float(np.percentile(self.first_samples_ms, q, method="higher"))


@dataclass(frozen=True)
class Sample:
    """One call: wall-clock and CPU milliseconds, and for a stepwise policy the CPU
    milliseconds to each assignment from the one before it (the first: from the start)."""

    wall_ms: float
    cpu_ms: float
    gaps_ms: tuple[float, ...] = ()


def _timed(policy: Policy, snapshot: Snapshot) -> tuple[Sample, int]:
    """One call, as the dispatcher makes it (`dispatcher.decisions`): a large one with the
    garbage collector's passes deferred until it ends, so a pass that walks the snapshot
    (30 ms at 100,000 x 256 x 256) is not counted against whichever assignment it hit."""
    if not is_large(snapshot):
        return _timed_call(policy, snapshot)
    with collections_deferred():
        return _timed_call(policy, snapshot)


def _timed_call(policy: Policy, snapshot: Snapshot) -> tuple[Sample, int]:
    if isinstance(policy, Stepwise):
        return _timed_steps(policy, snapshot)
    began_cpu = time.thread_time_ns()
    began = time.perf_counter_ns()
    placed = len(policy.assign(snapshot))
    wall_ns = time.perf_counter_ns() - began
    return Sample(wall_ns / 1e6, (time.thread_time_ns() - began_cpu) / 1e6), placed


def _timed_steps(policy: Stepwise, snapshot: Snapshot) -> tuple[Sample, int]:
    """`assign` as its steps (what `assign` is), with the CPU time to each assignment."""
    gaps_ns: list[int] = []
    began_cpu = last_cpu = time.thread_time_ns()
    began = time.perf_counter_ns()
    for step in policy.steps(snapshot):
        if step is not None:
            now_cpu = time.thread_time_ns()
            gaps_ns.append(now_cpu - last_cpu)
            last_cpu = now_cpu
    wall_ns = time.perf_counter_ns() - began
    cpu_ms = (time.thread_time_ns() - began_cpu) / 1e6
    return Sample(wall_ns / 1e6, cpu_ms, tuple(gap / 1e6 for gap in gaps_ns)), len(gaps_ns)


def measure(policy: Policy, snapshot: Snapshot, budget: Budget) -> tuple[list[Sample], int, bool]:
    """Each call's milliseconds, the assignments of one call, and whether the only call was
    cut at the cap (its milliseconds so far are then the one sample, a lower bound).

    The first call warms up and is not counted unless it took `budget_s` or more (then every
    call counts); no call starts that would, at the last call's pace, end past the cap."""
    samples: list[Sample] = []
    began_s = time.perf_counter()
    began_cpu_ns = time.thread_time_ns()
    try:
        with deadline(budget.cap_s):
            first, placed = _timed(policy, snapshot)
            if first.wall_ms >= 1000.0 * budget.budget_s:
                samples.append(first)
            while len(samples) < budget.max_reps and _more(samples, began_s, first, budget):
                samples.append(_timed(policy, snapshot)[0])
    except Overrun:
        if samples:  # the cap passed during a call: that call is left out
            return samples, placed, False
        wall_ms = 1000.0 * (time.perf_counter() - began_s)
        return [Sample(wall_ms, (time.thread_time_ns() - began_cpu_ns) / 1e6)], 0, True
    return samples, placed, False


def _more(samples: Sequence[Sample], began_s: float, first: Sample, budget: Budget) -> bool:
    elapsed_s = time.perf_counter() - began_s
    if len(samples) >= budget.min_reps and elapsed_s >= budget.budget_s:
        return False
    last_s = (samples[-1] if samples else first).wall_ms / 1000.0
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
        samples_ms=tuple(sample.wall_ms for sample in samples),
        cpu_samples_ms=tuple(sample.cpu_ms for sample in samples),
        cut=cut,
        gap_samples_ms=tuple(gap for sample in samples for gap in sample.gaps_ms),
        first_samples_ms=tuple(sample.gaps_ms[0] for sample in samples if sample.gaps_ms),
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
                p99 = f"CPU {row.cpu_pct_ms(99):.3f} wall {row.pct_ms(99):.3f}"
                print(f"{case:6} {size.label:>22} {name:12} p99 {p99} ms", file=sys.stderr)
                rows.append(row)
    return rows
