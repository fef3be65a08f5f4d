"""The fast `affinity` decision (`search.Search`: bounds, kept options, a heap of lanes) makes
exactly the assignments of the reference that evaluates every lane against every queue at
every step (`place(..., prune=False)`), reasons and runner-ups included.

Random snapshots over what the rules look at: idle and busy workers, 1 to 64 groups, fast and
slow cards, classic cache and `--cache-lru`, priorities, pinned A/B groups, eligible subsets,
old and fresh waits, traffic. A change to a rule that breaks a bound or an invalidation shows
up here as the first snapshot where the two differ."""

from __future__ import annotations

import random

import pytest

from gateway.scheduler.affinity.policy import place
from gateway.scheduler.affinity.state import Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.queue import group_jobs, heads_in_order
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView

FAMILIES = ("sd15", "sdxl")
NOW_S = 1_000.0


def random_job(rng: random.Random, index: int, models: list[str], workers: int) -> JobView:
    model = models[min(int(rng.paretovariate(1.0)) - 1, len(models) - 1)]
    extra = f"lora{rng.randrange(3)}" if rng.random() < 0.1 else None
    keys = frozenset((model,) if extra is None else (model, extra))
    eligible = None
    if rng.random() < 0.1:
        eligible = frozenset(f"w{i}" for i in rng.sample(range(workers), rng.randint(1, workers)))
    arrived_s = NOW_S - rng.choice((rng.uniform(0.0, 1.0), rng.uniform(0.0, 600.0)))
    return JobView(
        job_id=f"j{index:05d}",
        enqueued_at_s=arrived_s,
        priority=rng.choice((0, 0, 0, 0, 1, -1)),
        model_keys=keys,
        checkpoint=model,
        family=FAMILIES[hash(model) % 2] if rng.random() < 0.5 else "sd15",
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
    rng = random.Random(seed)
    groups = rng.choice((1, 2, 4, 8, 16, 32, 64))
    models = [f"m{i}" for i in range(groups)]
    workers = rng.randint(1, 10)
    busy = rng.choice(("idle", "busy", "mixed"))
    farm = tuple(
        random_worker(rng, i, models, busy == "busy" or (busy == "mixed" and rng.random() < 0.5))
        for i in range(workers)
    )
    jobs = [random_job(rng, i, models, workers) for i in range(rng.randint(1, 4 * groups + 8))]
    grouped = group_jobs(jobs, head=rng.choice((2, 8, 64)))
    demand = {m: rng.uniform(0.0, 0.5) for m in models if rng.random() < 0.5}
    return Snapshot(NOW_S, heads_in_order(grouped), farm, demand, grouped)


def decided(snapshot: Snapshot, tuning: Tuning, prune: bool) -> list[Assignment]:
    queues = [Queue.of(group) for group in snapshot.groups]
    return place(snapshot, queues, tuning, prune=prune)


TUNINGS = (Tuning(), Tuning(switch_ratio=1.0, patience=0.0), Tuning(slow_ratio=1.1))


@pytest.mark.parametrize("block", range(4))
def test_the_fast_decision_makes_the_reference_assignments(block: int) -> None:
    for seed in range(block * 100, block * 100 + 100):
        snapshot = random_snapshot(seed)
        tuning = TUNINGS[seed % len(TUNINGS)]
        fast = decided(snapshot, tuning, prune=True)
        assert fast == decided(snapshot, tuning, prune=False), f"seed {seed}"


def test_the_random_snapshots_reach_what_the_search_skips() -> None:
    """The table above is worth something only if the cases where skipping matters occur:
    bursts with many assignments, busy farms that leave jobs waiting, loads and warm runs."""
    reasons: set[str] = set()
    most = 0
    unplaced = 0
    for seed in range(400):
        snapshot = random_snapshot(seed)
        placed = decided(snapshot, Tuning(), prune=True)
        reasons |= {a.why.reason for a in placed if a.why}
        most = max(most, len(placed))
        unplaced += not placed
    assert reasons == {"warm", "load"}
    assert most >= 20
    assert unplaced >= 10
