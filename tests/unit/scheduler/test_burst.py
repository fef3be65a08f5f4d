"""burst: telling a burst from traffic, and planning it for the makespan."""

from __future__ import annotations

from gateway.scheduler.burst import is_burst, plan
from gateway.scheduler.lanes import Lane
from tests.unit.scheduler.factories import job, worker


def test_many_jobs_at_once_are_a_burst_a_trickle_is_not() -> None:
    burst = [job(f"j{i}", "m", at_s=0.1 * i) for i in range(10)]
    trickle = [job(f"j{i}", "m", at_s=5.0 * i) for i in range(10)]
    assert is_burst(burst, window_s=2.0, min_jobs=8)
    assert not is_burst(trickle, window_s=2.0, min_jobs=8)


def test_the_plan_keeps_models_in_blocks_and_balances_the_workers() -> None:
    lanes = {
        "a": Lane(worker("a"), 0.0, ("m1",), 1),
        "b": Lane(worker("b"), 0.0, ("m2",), 1),
    }
    jobs = [job(f"x{i}", "m1") for i in range(8)] + [job(f"y{i}", "m2") for i in range(8)]
    groups = {frozenset({"m1"}): jobs[:8], frozenset({"m2"}): jobs[8:]}
    planned = plan(lanes, groups, now_s=0.0)
    assert {j.checkpoint for j in planned["a"]} == {"m1"}
    assert {j.checkpoint for j in planned["b"]} == {"m2"}


def test_fussy_jobs_get_the_card_that_is_relatively_best_for_them() -> None:
    fast = worker("fast").__class__(name="fast", speed={"sd15": 20.0, "sdxl": 40.0})
    slow = worker("slow").__class__(name="slow", speed={"sd15": 10.0, "sdxl": 5.0})
    lanes = {"fast": Lane(fast, 0.0, (), 1), "slow": Lane(slow, 0.0, (), 1)}
    xl = [job(f"x{i}", "xl", family="sdxl", work=40.0) for i in range(4)]
    sd = [job(f"s{i}", "sd", work=10.0) for i in range(4)]
    planned = plan(lanes, {frozenset({"xl"}): xl, frozenset({"sd"}): sd}, now_s=0.0)
    assert {j.family for j in planned["fast"]} == {"sdxl"}
    assert {j.family for j in planned["slow"]} == {"sd15"}
