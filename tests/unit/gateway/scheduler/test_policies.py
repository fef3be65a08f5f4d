"""Every registered policy keeps the Policy contract; each baseline behaves as described."""

from __future__ import annotations

import random

import pytest

import gateway.scheduler
from gateway.scheduler.cost import can_run
from gateway.scheduler.policy import POLICIES, make_policy
from gateway.scheduler.snapshot import Snapshot
from tests.unit.gateway.scheduler.factories import job, snap, worker

MODELS = ["m1", "m2", "m3", "m4"]


def random_snapshot(rng: random.Random) -> Snapshot:
    workers = [
        worker(
            f"w{i}",
            resident=(rng.choice(MODELS),),
            free=rng.randint(0, 2),
            speed=rng.choice([5.0, 10.0, 20.0]),
            outstanding=rng.randint(0, 2),
            outstanding_s=rng.uniform(0, 5),
        )
        for i in range(rng.randint(1, 4))
    ]
    names = [w.name for w in workers]
    jobs = [
        job(
            f"j{i}",
            rng.choice(MODELS),
            at_s=rng.uniform(0, 30),
            family=rng.choice(["sd15", "sdxl"]),
            eligible=frozenset(rng.sample(names, rng.randint(1, len(names))))
            if rng.random() < 0.3
            else None,
        )
        for i in range(rng.randint(0, 40))
    ]
    jobs.sort(key=lambda j: j.enqueued_at_s)
    return snap(30.0, jobs, workers)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_keeps_the_contract(name: str) -> None:
    rng = random.Random(7)
    for _ in range(150):
        snapshot = random_snapshot(rng)
        out = make_policy(name).assign(snapshot)
        jobs = {j.job_id: j for j in snapshot.jobs}
        workers = {w.name: w for w in snapshot.workers}
        assert len({a.job_id for a in out}) == len(out), "a job assigned twice"
        for a in out:
            assert can_run(jobs[a.job_id], workers[a.worker]), "an ineligible worker"
        for w in snapshot.workers:
            assert sum(a.worker == w.name for a in out) <= w.free_slots, "over free slots"


def assigned(name: str, snapshot: Snapshot) -> dict[str, str]:
    return {a.job_id: a.worker for a in make_policy(name).assign(snapshot)}


# (policy, snapshot, expected assignments) -- behaviour on small farms.
CASES = [
    (
        "affinity prefers the worker holding the model",
        "affinity",
        snap(10.0, [job("a", "m1", 9.0)], [worker("w1", ("m2",)), worker("w2", ("m1",))]),
        {"a": "w2"},
    ),
    (
        "affinity leaves a job to a faster warm card that finishes it sooner (2 s against 8 s)",
        "affinity",
        snap(
            10.0,
            [job("a", "m1", 9.0, work=40.0)],
            [
                worker("slow", ("m1",), speed=5.0),
                worker("fast", ("m1",), free=0, speed=40.0, outstanding=1, outstanding_s=1.0),
            ],
        ),
        {},
    ),
    (
        "...until the fast card is due, and then for at most the slow card's extra run time "
        "(8 s - 1 s), then runs it there",
        "affinity",
        snap(
            16.5,
            [job("a", "m1", 9.0, work=40.0)],
            [
                worker("slow", ("m1",), speed=5.0),
                worker("fast", ("m1",), free=0, speed=40.0, outstanding=1, outstanding_s=0.0),
            ],
        ),
        {"a": "slow"},
    ),
    (
        "...however long the job waited, while the fast card is not yet due (the clock waits)",
        "affinity",
        snap(
            16.5,
            [job("a", "m1", 9.0, work=40.0)],
            [
                worker("slow", ("m1",), speed=5.0),
                worker("fast", ("m1",), free=0, speed=40.0, outstanding=1, outstanding_s=1.0),
            ],
        ),
        {},
    ),
    (
        "affinity idles rather than cold-load one fresh job (the holder is busy briefly)",
        "affinity",
        snap(
            10.0,
            [job("a", "m1", 9.9)],
            [
                worker("w1", ("m2",)),
                worker("w2", ("m1",), free=0, outstanding=1, outstanding_s=1.0),
            ],
        ),
        {},
    ),
    (
        "affinity serves the warm queue before a cold one",
        "affinity",
        snap(10.0, [job("a", "m2", 1.0), job("b", "m1", 2.0)], [worker("w1", ("m1",))]),
        {"b": "w1"},
    ),
    (
        "swarm_like waits 1.5 s before loading a model",
        "swarm_like",
        snap(10.0, [job("a", "m1", 9.0)], [worker("w1", ("m2",))]),
        {},
    ),
    (
        "swarm_like loads onto the longest idle worker after 1.5 s",
        "swarm_like",
        snap(
            10.0,
            [job("a", "m1", 8.0)],
            [worker("w1", ("m2",), idle_since_s=5.0), worker("w2", ("m3",), idle_since_s=1.0)],
        ),
        {"a": "w2"},
    ),
    (
        "swarm_like gives a holder its oldest job at once",
        "swarm_like",
        snap(10.0, [job("a", "m1", 9.9), job("b", "m1", 9.95)], [worker("w1", ("m1",))]),
        {"a": "w1"},
    ),
    (
        "swarm_like loads the highest pressure model first",
        "swarm_like",
        snap(
            10.0,
            [job("a", "m1", 1.0), job("b", "m2", 8.0), job("c", "m2", 8.0)],
            [worker("w1", ("m3",))],
        ),
        {"b": "w1"},
    ),
    (
        "ect_greedy picks the least expected completion, load included",
        "ect_greedy",
        snap(
            10.0,
            [job("a", "m1", 9.0)],
            [worker("w1", ("m2",)), worker("w2", ("m1",), outstanding_s=2.0)],
        ),
        {"a": "w2"},
    ),
    (
        "affinity_only waits for the busy holder",
        "affinity_only",
        snap(10.0, [job("a", "m1", 1.0)], [worker("w1", ("m2",)), worker("w2", ("m1",), free=0)]),
        {},
    ),
    (
        "affinity_only sends a model nobody holds anywhere free",
        "affinity_only",
        snap(10.0, [job("a", "m9", 1.0)], [worker("w1", ("m2",)), worker("w2", ("m1",), free=0)]),
        {"a": "w1"},
    ),
]


@pytest.mark.parametrize(("what", "name", "snapshot", "expected"), CASES, ids=[c[0] for c in CASES])
def test_policy_behaviour(
    what: str, name: str, snapshot: Snapshot, expected: dict[str, str]
) -> None:
    assert assigned(name, snapshot) == expected


def test_affinity_loads_a_second_copy_only_where_it_shortens_the_queue() -> None:
    # Four 1 s jobs of m1, a 4 s load: one copy ends at 8 s, two at 6 s, so both load. A
    # busy worker with warm work of its own (w3) is not pulled in for it.
    jobs = [job(f"j{i}", "m1", 0.0) for i in range(4)]
    workers = [worker("w1", ("m2",), free=2), worker("w2", ("m3",), free=2)]
    out = make_policy("affinity").assign(snap(60.0, jobs, workers))
    assert sorted(a.worker for a in out) == ["w1", "w1", "w2", "w2"]
    # One job: the second idle worker has nothing to shorten.
    out = make_policy("affinity").assign(snap(60.0, jobs[:1], workers))
    assert len(out) == 1


def test_random_is_reproducible_and_spreads() -> None:
    jobs = [job(f"j{i}", "m1") for i in range(40)]
    workers = [worker(f"w{i}", free=40) for i in range(4)]
    first = assigned("random", snap(1.0, jobs, workers))
    assert first == assigned("random", snap(1.0, jobs, workers))
    assert len(set(first.values())) == 4


def test_default_policy_is_registered() -> None:
    assert gateway.scheduler.DEFAULT_POLICY in POLICIES
