"""Other nodes' workers as lanes: the record round trip, and the guarantee of
gateway/peers/lanes.py that each job is claimed by the node whose lane the policy chose."""

from __future__ import annotations

import json
import random

import pytest

import gateway.scheduler  # noqa: F401  (registers the policies)
from gateway.peers.lanes import farm_lanes, lane_of, lane_record
from gateway.scheduler.policy import make_policy
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView
from tests.unit.gateway.scheduler.factories import job, snap, worker

LATE_BINDERS = ("affinity", "affinity_only", "swarm_like")


def test_a_lane_survives_the_trip_through_json() -> None:
    view = worker(
        "w",
        ("m1", "m2"),
        outstanding=2,
        outstanding_s=3.5,
        cache_slots=2,
        queued=(frozenset({"m1", "lora"}),),
        estimated=frozenset({"sdxl"}),
        estimated_load=frozenset({"m2"}),
        fixed_s={"sd15": 0.5},
        vram_free_mib=1000.0,
        card="emulated h200",
        group="fp16",
    )
    assert lane_of(json.loads(json.dumps(lane_record(view))), age_s=0.0) == view


@pytest.mark.parametrize(("age_s", "left_s"), [(0.0, 3.0), (1.0, 2.0), (5.0, 0.0), (-1.0, 3.0)])
def test_what_a_lane_held_is_nearer_done_by_the_age_of_its_record(
    age_s: float, left_s: float
) -> None:
    record = lane_record(worker("w", outstanding=1, outstanding_s=3.0))
    assert lane_of(record, age_s).outstanding_s == left_s


def claims(
    policy: str, now_s: float, jobs: list[JobView], mine: list[WorkerView], others: list[WorkerView]
) -> list[Assignment]:
    """What one node claims: the policy's assignments to its own lanes, the others counted."""
    snapshot = snap(now_s, jobs, list(farm_lanes(tuple(mine), tuple(others))))
    names = {view.name for view in mine}
    return [a for a in make_policy(policy).assign(snapshot) if a.worker in names]


def whole_farm(policy: str, snapshot: Snapshot) -> list[tuple[str, str]]:
    ordered = tuple(sorted(snapshot.workers, key=lambda view: view.name))
    return pairs(make_policy(policy).assign(Snapshot(snapshot.now_s, snapshot.jobs, ordered)))


def pairs(assignments: list[Assignment]) -> list[tuple[str, str]]:
    return sorted((a.job_id, a.worker) for a in assignments)


def test_a_node_leaves_a_job_to_an_idle_warm_worker_of_another_node() -> None:
    jobs = [job("j", "m1", 0.0)]
    a, b = [worker("a", ("m2",))], [worker("b", ("m1",))]
    assert claims("affinity", 1.0, jobs, a, b) == []
    assert pairs(claims("affinity", 1.0, jobs, b, a)) == [("j", "b")]


def test_an_idle_node_waits_for_a_busy_holder_elsewhere_only_as_long_as_its_own_load() -> None:
    # b holds m1 and frees in 1 s; a would need 4 s to load it (the ski-rental bound, whose
    # clock runs once b is due to have freed).
    a = [worker("a", ("m2",), idle_since_s=0.0)]
    b = [worker("b", ("m1",), free=1, outstanding=1, outstanding_s=1.0)]
    assert claims("affinity", 1.0, [job("j", "m1", 1.0)], a, b) == []
    assert claims("affinity", 5.5, [job("j", "m1", 1.0)], a, b) == []
    overdue = [worker("b", ("m1",), free=0, outstanding=1, outstanding_s=0.0)]
    assert pairs(claims("affinity", 5.5, [job("j", "m1", 1.0)], a, overdue)) == [("j", "a")]


def random_farm(rng: random.Random) -> tuple[Snapshot, list[WorkerView], list[WorkerView]]:
    models = [f"m{i}" for i in range(rng.randint(1, 4))]
    views = [
        worker(
            f"w{i}",
            tuple(rng.sample(models, rng.randint(0, min(2, len(models))))),
            free=rng.randint(0, 2),
            outstanding=rng.randint(0, 1),
            outstanding_s=rng.uniform(0, 10),
            speed=rng.choice([5.0, 10.0, 20.0]),
            load_s=rng.uniform(1, 8),
            idle_since_s=rng.uniform(0, 5),
        )
        for i in range(rng.randint(2, 5))
    ]
    jobs = [job(f"j{i}", rng.choice(models), rng.uniform(0, 10)) for i in range(rng.randint(1, 8))]
    jobs.sort(key=lambda j: j.enqueued_at_s)
    split = rng.randint(1, len(views) - 1)
    return snap(12.0, jobs, views), views[:split], views[split:]


@pytest.mark.parametrize("policy", LATE_BINDERS)
def test_two_nodes_claim_together_what_one_node_of_the_whole_farm_would_each_job_once(
    policy: str,
) -> None:
    rng = random.Random(15)
    for _ in range(300):
        snapshot, a, b = random_farm(rng)
        by_a = claims(policy, snapshot.now_s, list(snapshot.jobs), a, b)
        by_b = claims(policy, snapshot.now_s, list(snapshot.jobs), b, a)
        assert not {x.job_id for x in by_a} & {x.job_id for x in by_b}
        assert pairs(by_a + by_b) == whole_farm(policy, snapshot)
