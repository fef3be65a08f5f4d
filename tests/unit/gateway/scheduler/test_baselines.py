"""round_robin, least_outstanding and sticky: table-driven over snapshots."""

from __future__ import annotations

import pytest

from gateway.scheduler.policies.baselines import LeastOutstanding, RoundRobin, Sticky
from gateway.scheduler.policy import make_policy
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


def job(
    job_id: str, ckpt: str | None = None, eligible: set[str] | None = None, group: str | None = None
) -> JobView:
    return JobView(
        job_id,
        0.0,
        checkpoint=ckpt,
        group=group,
        eligible=None if eligible is None else frozenset(eligible),
    )


def worker(
    name: str, free: int = 2, outstanding: int = 0, last: str | None = None, group: str = "default"
) -> WorkerView:
    return WorkerView(
        name, group=group, free_slots=free, outstanding=outstanding, last_checkpoint=last
    )


def pairs(assignments: list[Assignment]) -> list[tuple[str, str]]:
    return [(a.job_id, a.worker) for a in assignments]


def test_least_outstanding_spreads_and_respects_slots() -> None:
    snap = Snapshot(
        0.0,
        (job("a"), job("b"), job("c"), job("d")),
        (worker("w1", free=1, outstanding=1), worker("w2", free=2)),
    )
    assert pairs(LeastOutstanding().assign(snap)) == [("a", "w2"), ("b", "w1"), ("c", "w2")]


def test_sticky_prefers_the_worker_with_the_same_checkpoint() -> None:
    snap = Snapshot(
        0.0,
        (job("a", "x"), job("b", "y")),
        (worker("w1", last="y", outstanding=1, free=1), worker("w2", last="x")),
    )
    assert pairs(Sticky().assign(snap)) == [("a", "w2"), ("b", "w1")]


def test_round_robin_takes_turns_across_calls() -> None:
    policy = RoundRobin()
    snap = Snapshot(0.0, (job("a"),), (worker("w1"), worker("w2")))
    chosen = [policy.assign(snap)[0].worker for _ in range(4)]
    assert chosen == ["w1", "w2", "w1", "w2"]


@pytest.mark.parametrize("name", ["round_robin", "least_outstanding", "sticky"])
def test_policies_honour_eligibility_and_groups(name: str) -> None:
    snap = Snapshot(
        0.0,
        (job("a", eligible={"w2"}), job("b", group="g2"), job("c", eligible=set())),
        (worker("w1"), worker("w2"), worker("w3", group="g2")),
    )
    assert sorted(pairs(make_policy(name).assign(snap))) == [("a", "w2"), ("b", "w3")]
