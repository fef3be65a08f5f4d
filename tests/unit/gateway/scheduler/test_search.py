"""The fast `affinity` decision (`search.Search`: bounds, kept options, a heap of lanes) makes
exactly the assignments of the reference that evaluates every lane against every queue at
every step (`place(..., prune=False)`), reasons and runner-ups included.

Random snapshots over what the rules look at: idle and busy workers, 1 to 64 groups, fast and
slow cards, classic cache and `--cache-lru`, priorities, pinned A/B groups, eligible subsets,
old and fresh waits, traffic. A change to a rule that breaks a bound or an invalidation shows
up here as the first snapshot where the two differ."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from gateway.scheduler.affinity.policy import place
from gateway.scheduler.affinity.state import Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.queue import group_jobs, heads_in_order
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView

FAMILIES = ("sd15", "sdxl")
NOW_S = 1_000.0


def random_job(rng: random.Random, index: int, models: list[str], workers: int) -> JobView:
    pick = min(int(rng.paretovariate(1.0)) - 1, len(models) - 1)
    model = models[pick]
    extra = f"lora{rng.randrange(3)}" if rng.random() < 0.1 else None
    keys = frozenset((model,) if extra is None else (model, extra))
    checkpoint: str | None = model
    if rng.random() < 0.03:
        keys, checkpoint = frozenset(), None  # a workflow with no loader: warm everywhere
    eligible = None
    if rng.random() < 0.1:
        eligible = frozenset(f"w{i}" for i in rng.sample(range(workers), rng.randint(1, workers)))
    arrived_s = NOW_S - rng.choice((rng.uniform(0.0, 1.0), rng.uniform(0.0, 600.0)))
    return JobView(
        job_id=f"j{index:05d}",
        enqueued_at_s=arrived_s,
        priority=rng.choice((0, 0, 0, 0, 1, -1)),
        model_keys=keys,
        checkpoint=checkpoint,
        family=FAMILIES[pick % 2],
        work_units=rng.choice((2.0, 5.0, 10.0, 40.0)),
        group="b" if rng.random() < 0.05 else None,
        eligible=eligible,
        score=arrived_s,
    )


def random_worker(rng: random.Random, index: int, models: list[str], busy: bool) -> WorkerView:
    lru = rng.random() < 0.3
    slots = rng.randint(2, 6) if lru else 1
    resident = tuple(dict.fromkeys(rng.choice(models) for _ in range(rng.randint(0, slots))))
    fast = rng.random() < 0.5
    free_slots = rng.choice((0, 1, 2)) if busy else rng.choice((1, 2, 2, 4))
    outstanding = rng.randint(1, 2) if busy else 0
    return WorkerView(
        name=f"w{index}",
        group="b" if rng.random() < 0.1 else "default",
        free_slots=free_slots,
        outstanding=outstanding,
        outstanding_s=rng.uniform(0.0, 20.0) if busy else 0.0,
        resident=resident,
        speed={f: (9.0 if fast else 3.0) * rng.uniform(0.8, 1.2) for f in FAMILIES},
        load_s={m: rng.uniform(1.0, 12.0) for m in models if rng.random() < 0.7},
        idle_since_s=None if busy else NOW_S - rng.uniform(0.0, 60.0),
        cache_slots=slots,
        fixed_s={"sdxl": 0.5} if rng.random() < 0.5 else {},
        queued=(frozenset((rng.choice(models),)),) if busy and rng.random() < 0.5 else (),
    )


def random_snapshot(seed: int) -> Snapshot:
    """1 to 64 groups over as many checkpoints on 1 to 16 workers, idle, busy or both."""
    rng = random.Random(seed)
    groups = rng.choice((1, 2, 4, 8, 16, 32, 64))
    workers = rng.randint(1, 16 if groups < 16 else 8)
    state = rng.choice(("idle", "busy", "mixed"))
    return _snapshot(rng, groups, workers, rng.randint(1, 4 * groups + 8), state)


def crowded_snapshot(seed: int) -> Snapshot:
    """A few checkpoints held by many workers, most idle: second copies and evictions of a
    model someone else holds, where one placement changes what others' choices cost."""
    rng = random.Random(seed)
    return _snapshot(rng, rng.randint(2, 4), rng.randint(4, 10), rng.randint(10, 40), "mostly idle")


def classic_snapshot(seed: int) -> Snapshot:
    """Idle workers of two speeds under the classic cache, each holding one of a few
    checkpoints: an idle worker that left its queues looks again after each placement, and
    what it would evict may meanwhile have been loaded elsewhere (no reload owed)."""
    rng = random.Random(seed)
    names = [f"m{i}" for i in range(rng.randint(2, 5))]
    farm = tuple(
        WorkerView(
            name=f"w{i}",
            free_slots=rng.choice((1, 2, 3)),
            resident=(rng.choice(names),),
            speed={family: rng.choice((3.0, 9.0)) for family in FAMILIES},
            load_s={m: rng.uniform(1.0, 12.0) for m in names},
            idle_since_s=NOW_S - rng.uniform(0.0, 30.0),
        )
        for i in range(rng.randint(3, 8))
    )
    waiting = []
    for i in range(rng.randint(5, 40)):
        arrived_s = NOW_S - rng.uniform(0.0, rng.choice((1.0, 60.0, 600.0)))
        model = rng.choice(names)
        waiting.append(
            JobView(
                job_id=f"j{i:05d}",
                enqueued_at_s=arrived_s,
                model_keys=frozenset((model,)),
                checkpoint=model,
                work_units=rng.choice((5.0, 20.0)),
                score=arrived_s,
            )
        )
    grouped = group_jobs(waiting)
    demand = {m: rng.uniform(0.0, 1.0) for m in names}
    return Snapshot(NOW_S, heads_in_order(grouped), farm, demand, grouped)


def _snapshot(rng: random.Random, models: int, workers: int, jobs: int, state: str) -> Snapshot:
    names = [f"m{i}" for i in range(models)]
    busy = {"idle": 0.0, "busy": 1.0, "mixed": 0.5, "mostly idle": 0.3}[state]
    farm = tuple(random_worker(rng, i, names, rng.random() < busy) for i in range(workers))
    waiting = [random_job(rng, i, names, workers) for i in range(jobs)]
    grouped = group_jobs(waiting, head=rng.choice((2, 8, 64)))
    demand = {m: rng.uniform(0.0, 0.5) for m in names if rng.random() < 0.5}
    return Snapshot(NOW_S, heads_in_order(grouped), farm, demand, grouped)


def decided(snapshot: Snapshot, tuning: Tuning, prune: bool) -> list[Assignment]:
    queues = [Queue.of(group) for group in snapshot.groups]
    return place(snapshot, queues, tuning, prune=prune)


TUNINGS = (Tuning(), Tuning(switch_ratio=1.0, patience=0.0), Tuning(slow_ratio=1.1))


@pytest.mark.parametrize(
    ("make", "seeds"),
    [
        (random_snapshot, range(0, 120)),
        (random_snapshot, range(120, 240)),
        (crowded_snapshot, range(80)),
        (classic_snapshot, range(240)),
    ],
)
def test_the_fast_decision_makes_the_reference_assignments(
    make: Callable[[int], Snapshot], seeds: range
) -> None:
    for seed in seeds:
        snapshot = make(seed)
        tuning = TUNINGS[seed % len(TUNINGS)]
        fast = decided(snapshot, tuning, prune=True)
        assert fast == decided(snapshot, tuning, prune=False), f"{make.__name__}({seed})"


def test_the_random_snapshots_reach_what_the_search_skips() -> None:
    """The table above is worth something only if the cases where skipping matters occur:
    bursts with many assignments, busy farms that leave jobs waiting, loads and warm runs."""
    reasons: set[str] = set()
    most = 0
    unplaced = 0
    for seed in range(120):
        snapshot = random_snapshot(seed)
        placed = decided(snapshot, Tuning(), prune=True)
        reasons |= {a.why.reason for a in placed if a.why}
        most = max(most, len(placed))
        unplaced += not placed
    assert reasons == {"warm", "load"}
    assert most >= 20
    assert unplaced >= 3
