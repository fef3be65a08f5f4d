"""`dispatcher.decisions`: a large decision by a stepwise policy is made on the event loop in
steps, the loop serving others between them, with the assignments `assign` gives, each handed
to the caller as it is made, and the garbage collector's passes deferred until it ends."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

import gateway.scheduler  # noqa: F401  (registers the policies)
from bench.decision.snapshots import Size, build_snapshot
from gateway.dispatch import dispatcher
from gateway.scheduler.policy import Stepwise, make_policy
from gateway.scheduler.snapshot import Assignment, Snapshot


@dataclass
class Noting:
    """A stepwise policy that assigns the snapshot's first `count` jobs, a step apart, noting
    `note()` before each (how often another task has run, how many the caller has taken)."""

    note: Callable[[], int]
    count: int = 5
    seen: list[int] = field(default_factory=list)
    name: str = "noting"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return [step for step in self.steps(snapshot) if step is not None]

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]:
        for job in snapshot.jobs[: self.count]:
            self.seen.append(self.note())
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
    policy = Noting(lambda: len(ticks))
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


@dataclass
class Collecting:
    """A stepwise policy that notes at each step whether the garbage collector is on, and
    fails at its last step when told to."""

    fail: bool = False
    enabled: list[bool] = field(default_factory=list)
    name: str = "collecting"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return [step for step in self.steps(snapshot) if step is not None]

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]:
        for _ in range(3):
            self.enabled.append(gc.isenabled())
            yield None
        if self.fail:
            raise RuntimeError("policy failed")


@pytest.mark.parametrize("fail", [False, True], ids=["ends", "raises"])
async def test_collections_wait_until_a_large_decision_ends(large: Snapshot, fail: bool) -> None:
    policy = Collecting(fail=fail)
    assert gc.isenabled()
    if fail:
        with pytest.raises(RuntimeError):
            await dispatcher.decide(policy, large)
    else:
        assert await dispatcher.decide(policy, large) == []
    assert policy.enabled == [False, False, False]
    assert gc.isenabled()


async def test_a_small_decision_leaves_the_collector_alone() -> None:
    small = build_snapshot("burst", Size(10, 2, 1))
    assert len(small.groups) * len(small.workers) < dispatcher.OFF_LOOP_AT
    policy = Collecting()
    await dispatcher.decide(policy, small)
    assert policy.enabled == [True, True, True]


def test_serve_freezes_what_is_alive_before_it_serves() -> None:
    """In a fresh interpreter (freezing this one would keep the test run's heap for good)."""
    code = (
        "import gc\n"
        "from gateway.serve import freeze_heap\n"
        "assert gc.get_freeze_count() == 0\n"
        "freeze_heap()\n"
        "print(gc.get_freeze_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) > 10_000


async def test_each_assignment_reaches_the_caller_before_the_next_is_made(
    large: Snapshot,
) -> None:
    """The dispatcher claims and sends a burst's first jobs while the rest are decided."""
    taken: list[str] = []
    policy = Noting(lambda: len(taken), count=4)
    async for assignment in dispatcher.decisions(policy, large):
        taken.append(assignment.job_id)
    assert policy.seen == [0, 1, 2, 3]
    assert taken == [job.job_id for job in large.jobs[:4]]


async def test_a_decision_left_unread_gives_the_collector_back_when_closed(
    large: Snapshot,
) -> None:
    assert gc.isenabled()
    async with contextlib.aclosing(dispatcher.decisions(Noting(lambda: 0), large)) as made:
        async for _ in made:
            assert not gc.isenabled()
            break
    assert gc.isenabled()
