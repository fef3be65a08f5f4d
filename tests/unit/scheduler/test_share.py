"""share.water_fill: which jobs of a model's queue a worker should serve."""

from __future__ import annotations

from gateway.scheduler.lanes import Lane
from gateway.scheduler.share import water_fill
from tests.unit.scheduler.factories import job, worker


def lane(name: str, ready_s: float = 0.0, speed: float = 10.0) -> Lane:
    return Lane(worker(name, speed=speed), ready_s, (), 1)


JOBS = [job(f"j{i}", "m") for i in range(6)]  # 1 s each at speed 10


def test_without_holders_the_worker_serves_the_whole_queue() -> None:
    assert len(water_fill(lane("a"), [], JOBS, start_s=0.0).jobs) == 6


def test_two_idle_holders_split_the_queue() -> None:
    share = water_fill(lane("a"), [lane("b")], JOBS, start_s=0.0)
    assert len(share.jobs) == 3


def test_a_tie_goes_to_the_warm_asker_so_nobody_leaves_a_job_to_the_other() -> None:
    assert water_fill(lane("a"), [lane("b")], JOBS[:1], start_s=0.0).jobs == (JOBS[0],)


def test_a_cold_worker_takes_only_what_the_holder_would_finish_a_margin_later() -> None:
    # Holder free now; the asker loads for 2 s and needs a 2 s margin on top.
    share = water_fill(lane("a"), [lane("b")], JOBS, start_s=2.0, margin_s=2.0)
    assert len(share.jobs) == 1  # job 6: holder at 6 s, asker 3 s + 2 s margin < 6 s
    assert share.theirs_s == 6.0


def test_a_much_faster_holder_keeps_everything() -> None:
    share = water_fill(lane("slow", speed=2.0), [lane("fast", speed=40.0)], JOBS, start_s=0.0)
    assert share.jobs == ()
