"""The decision-cost harness: the snapshots it builds and the rows it produces (not timings)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.decision.__main__ import main
from bench.decision.snapshots import Size, build_snapshot
from bench.decision.timing import Budget, measure, run_rows
from gateway.scheduler.snapshot import Assignment, Snapshot

TINY = Budget(min_reps=2, max_reps=3, budget_s=0.0, cap_s=5.0)


@pytest.mark.parametrize(
    ("case", "free_workers", "free_slots"), [("burst", 8, 16), ("steady", 1, 1)]
)
def test_snapshots_are_built_as_the_dispatcher_builds_them(
    case: str, free_workers: int, free_slots: int
) -> None:
    snapshot = build_snapshot(case, Size(jobs=300, workers=8, models=4))
    assert len(snapshot.groups) == 4
    assert sum(group.count for group in snapshot.groups) == 300
    assert len(snapshot.jobs) == sum(len(group.head) for group in snapshot.groups)
    assert sum(w.free_slots > 0 for w in snapshot.workers) == free_workers
    assert sum(w.free_slots for w in snapshot.workers) == free_slots
    assert all(w.speed and w.load_s and w.resident for w in snapshot.workers)


def test_the_harness_gives_a_row_per_case_size_and_policy() -> None:
    sizes = [Size(10, 2, 1), Size(40, 4, 4)]
    rows = run_rows(sizes, ["swarm_like", "ect_greedy"], TINY)
    assert [(r.case, r.size, r.policy) for r in rows] == [
        (case, size, policy)
        for case in ("burst", "steady")
        for size in sizes
        for policy in ("swarm_like", "ect_greedy")
    ]
    assert all(len(r.samples_ms) >= 2 and not r.cut and r.placed > 0 for r in rows)


@dataclass(frozen=True)
class Sleepy:
    sleep_s: float
    name: str = "sleepy"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        time.sleep(self.sleep_s)
        return []


@pytest.mark.parametrize(
    ("sleep_s", "budget", "calls", "cut"),
    [
        (0.5, Budget(cap_s=0.05), 1, True),  # the one call is cut: a lower bound
        (0.0, Budget(min_reps=5, max_reps=7, budget_s=0.0), 5, False),
        (0.0, Budget(min_reps=5, max_reps=7, budget_s=10.0), 7, False),
    ],
)
def test_calls_are_counted_within_the_budget_and_the_cap(
    sleep_s: float, budget: Budget, calls: int, cut: bool
) -> None:
    snapshot = build_snapshot("burst", Size(10, 2, 1))
    samples, _, was_cut = measure(Sleepy(sleep_s), snapshot, budget)
    assert (len(samples), was_cut) == (calls, cut)


def test_slow_calls_all_count_and_none_starts_that_would_end_past_the_cap() -> None:
    snapshot = build_snapshot("burst", Size(10, 2, 1))
    samples, _, cut = measure(Sleepy(0.04), snapshot, Budget(budget_s=0.01, cap_s=0.3))
    assert not cut
    assert len(samples) >= 2
    assert sum(sample.wall_ms for sample in samples) <= 300.0


def test_a_call_that_waits_counts_its_wall_time_but_not_as_cpu() -> None:
    snapshot = build_snapshot("burst", Size(10, 2, 1))
    samples, _, _ = measure(Sleepy(0.05), snapshot, Budget(min_reps=2, max_reps=2, budget_s=0.0))
    assert all(sample.cpu_ms < sample.wall_ms / 2 for sample in samples)


def test_quick_mode_writes_the_table_and_the_plot(tmp_path: Path) -> None:
    assert main(["--quick", "--policies", "affinity,swarm_like", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "decision.md").read_text()
    assert "| burst | 10 x 2 x 1 |" in text
    assert "affinity CPU p50 / p99 ms | affinity wall p50 / p99 / max ms (calls)" in text
    assert "affinity assignments / CPU p50 ms each" in text
    assert "affinity CPU per assignment p50 / p99 ms (to the first, p99)" in text
    assert "| swarm_like CPU p50 / p99 ms |" in text
    assert (tmp_path / "decision.png").stat().st_size > 0


@dataclass(frozen=True)
class Paced:
    """A stepwise policy that burns `busy_s` of CPU before each of its `count` assignments."""

    busy_s: float
    count: int = 4
    name: str = "paced"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return [step for step in self.steps(snapshot) if step is not None]

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]:
        for job in snapshot.jobs[: self.count]:
            began = time.thread_time()
            while time.thread_time() - began < self.busy_s:
                pass
            yield None
            yield Assignment(job.job_id, snapshot.workers[0].name)


def test_a_stepwise_call_is_timed_per_assignment_too() -> None:
    """Each assignment's CPU time from the one before: what a job waits on once the job
    before it is placed, since the dispatcher sends each as it is made."""
    snapshot = build_snapshot("burst", Size(10, 2, 1))
    samples, placed, _ = measure(Paced(0.005), snapshot, Budget(min_reps=2, max_reps=2))
    assert placed == 4
    for sample in samples:
        assert len(sample.gaps_ms) == 4
        assert all(4.0 <= gap <= sample.cpu_ms / 2 for gap in sample.gaps_ms)
        assert sum(sample.gaps_ms) <= sample.cpu_ms
    assert all(not sample.gaps_ms for sample in measure(Sleepy(0.0), snapshot, TINY)[0])
