"""The hold of `affinity`: a small block that evicts a needed model waits for company while such
blocks are a minority of the queue; past `hold_share` it waits only for a stricter ski-rental
rule. `hold_share = 1` (always hold) was the default before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.scheduler.affinity import AffinityPolicy, Tuning
from gateway.scheduler.affinity.context import groups_of, small_share
from gateway.scheduler.lanes import lanes_of
from gateway.scheduler.policy import Policy, make_policy
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView
from tests.unit.scheduler.factories import job, snap, worker

NOW_S = 100.0


def loader() -> WorkerView:
    """Free, holding m0 (which recent demand makes worth keeping), with 1 s loads."""
    return replace(worker("w1", ("m0",), load_s=1.0), load_s={"sd15": 1.0, "m0": 1.0})


def busy_holder() -> WorkerView:
    """Holds m2, busy for 20 s: the farm has a backlog, so the hold is its full 12 s."""
    return worker("w2", ("m2",), free=0, outstanding=1, outstanding_s=20.0)


def only_w2(job_id: str) -> JobView:
    return job(job_id, "m2", NOW_S - 1.0, eligible=frozenset({"w2"}))


def queue(waited_s: float, *, rare_majority: bool) -> Snapshot:
    """One m1 job that has waited `waited_s`, and either three warm m2 jobs (small cold blocks a
    minority) or one m2 job and two fresh one-job blocks of m3 and m4 (a majority)."""
    lone = job("a", "m1", NOW_S - waited_s)
    if rare_majority:
        others = [only_w2("b"), job("c", "m3", NOW_S - 0.5), job("d", "m4", NOW_S - 0.5)]
    else:
        others = [only_w2("b"), only_w2("c"), only_w2("d")]
    return snap(NOW_S, [lone, *others], [loader(), busy_holder()], demand_per_s={"m0": 0.05})


def assigned(policy: Policy, snapshot: Snapshot) -> dict[str, str]:
    return {a.job_id: a.worker for a in policy.assign(snapshot)}


DEFAULT = make_policy("affinity")
ALWAYS_HOLD = AffinityPolicy(Tuning(hold_share=1.0))


CASES = [
    ("always-hold holds a lone job among warm work", ALWAYS_HOLD, 8.0, False, {}),
    ("always-hold holds a lone job among rare ones too", ALWAYS_HOLD, 8.0, True, {}),
    (
        "the default holds while rare blocks are a minority",
        DEFAULT,
        8.0,
        False,
        {},
    ),
    (
        "the default loads once rare blocks are most of the queue and the wait pays",
        DEFAULT,
        8.0,
        True,
        {"a": "w1"},
    ),
    (
        "the default still waits until the stricter ski-rental wait is paid",
        DEFAULT,
        4.0,
        True,
        {},
    ),
    ("both load once the hold is over", ALWAYS_HOLD, 13.0, True, {"a": "w1"}),
    ("the default too", DEFAULT, 13.0, True, {"a": "w1"}),
]


@pytest.mark.parametrize(
    ("what", "policy", "waited_s", "rare_majority", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_hold(
    what: str, policy: Policy, waited_s: float, rare_majority: bool, expected: dict[str, str]
) -> None:
    assert assigned(policy, queue(waited_s, rare_majority=rare_majority)) == expected


SHARES = [
    ("an empty queue", [], 0.0),
    ("warm work is not deferred", [job("a", "m0"), job("b", "m0")], 0.0),
    ("a one-job cold block among warm work", [job("a", "m0"), job("b", "m1")], 0.5),
    ("a cold block of hold_jobs jobs is not small", [job(f"j{i}", "m1") for i in range(4)], 0.0),
    ("three small cold blocks", [job("a", "m1"), job("b", "m2"), job("c", "m3")], 1.0),
]


@pytest.mark.parametrize(("what", "jobs", "expected"), SHARES, ids=[c[0] for c in SHARES])
def test_small_share(what: str, jobs: list[JobView], expected: float) -> None:
    snapshot = snap(NOW_S, jobs, [worker("w1", ("m0",))])
    share = small_share(lanes_of(snapshot), groups_of(snapshot.jobs), hold_jobs=4)
    assert share == pytest.approx(expected)


def test_a_first_use_on_an_idle_card_with_room_loads_at_once() -> None:
    # No worker holds m1 and the card evicts nothing: waiting cannot save the load.
    fresh = replace(worker("w1", (), load_s=10.0), load_s={"sd15": 10.0})
    lone = job("a", "m1", NOW_S - 0.1)
    assert assigned(DEFAULT, snap(NOW_S, [lone], [fresh])) == {"a": "w1"}


def test_a_load_waits_while_a_busy_holder_may_serve_the_job() -> None:
    fresh = replace(worker("w1", (), load_s=10.0), load_s={"sd15": 10.0})
    holder = worker("w2", ("m1",), free=0, outstanding=1, outstanding_s=3.0)
    lone = job("a", "m1", NOW_S - 0.1)
    assert assigned(DEFAULT, snap(NOW_S, [lone], [fresh, holder])) == {}
