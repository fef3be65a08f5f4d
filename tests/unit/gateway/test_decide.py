"""`dispatcher.decide`: a large decision by a stepwise policy is made on the event loop in
steps, the loop serving others between them, with the assignments `assign` gives."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import gateway.scheduler  # noqa: F401  (registers the policies)
from bench.decision.snapshots import Size, build_snapshot
from gateway.dispatch import dispatcher
from gateway.scheduler.policy import Stepwise, make_policy
from gateway.scheduler.snapshot import Assignment, Snapshot


@dataclass
class Recording:
    """A stepwise policy that notes, at each step, how often another task has run."""

    ticks: list[int]
    seen: list[int] = field(default_factory=list)
    name: str = "recording"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return [step for step in self.steps(snapshot) if step is not None]

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]:
        for job in snapshot.jobs[:5]:
            self.seen.append(len(self.ticks))
            yield None
            yield Assignment(job.job_id, snapshot.workers[0].name)


@pytest.fixture
def large() -> Snapshot:
    snapshot = build_snapshot("burst", Size(1_000, 16, 32))
    assert len(snapshot.groups) * len(snapshot.workers) >= dispatcher.OFF_LOOP_AT
    return snapshot


async def test_a_large_stepwise_decision_lets_the_loop_run_between_steps(
    large: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatcher, "STEP_S", 0.0)
    ticks: list[int] = []
    policy = Recording(ticks)
    assert isinstance(policy, Stepwise)

    async def tick() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    placed = await dispatcher.decide(policy, large)
    ticker.cancel()
    assert [a.job_id for a in placed] == [job.job_id for job in large.jobs[:5]]
    assert policy.seen == sorted(policy.seen) and len(set(policy.seen)) == len(policy.seen)


async def test_affinity_decides_in_steps_what_it_assigns_at_once(large: Snapshot) -> None:
    policy = make_policy("affinity")
    assert isinstance(policy, Stepwise)
    assert await dispatcher.decide(policy, large) == policy.assign(large)
