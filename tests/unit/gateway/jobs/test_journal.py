"""The journal of accepted jobs: the last `window_s` seconds, at most `max_items`."""

from __future__ import annotations

from gateway.jobs.journal import Accepted, Journal
from tests.unit.gateway.conftest import FakeClock
from tests.unit.gateway.jobs.test_store import new_job


def accepted(number: float | None = None, counted: bool = True) -> Accepted:
    return Accepted(new_job(number=number), 0, counted)


def test_it_keeps_only_the_last_window_seconds() -> None:
    clock = FakeClock()
    journal = Journal(window_s=10.0, clock=clock)
    old = accepted()
    journal.record(old)
    clock.advance(6.0)
    young = accepted()
    journal.record(young)
    assert [a.job.job_id for a in journal.recent()] == [old.job.job_id, young.job.job_id]
    clock.advance(5.0)
    assert [a.job.job_id for a in journal.recent()] == [young.job.job_id]
    clock.advance(6.0)
    assert journal.recent() == []


def test_it_keeps_at_most_its_bound_newest_first_out_last() -> None:
    journal = Journal(window_s=10.0, max_items=3, clock=FakeClock())
    jobs = [accepted() for _ in range(5)]
    for job in jobs:
        journal.record(job)
    assert [a.job.job_id for a in journal.recent()] == [a.job.job_id for a in jobs[2:]]
    assert len(journal) == 3


def test_a_job_that_ended_here_is_dropped() -> None:
    journal = Journal(clock=FakeClock())
    job = accepted()
    journal.record(job)
    journal.discard(job.job.job_id)
    journal.discard("never seen")
    assert journal.recent() == []


def test_the_counter_floor_is_what_the_numbering_incr_left_behind() -> None:
    assert accepted(number=4).counter_floor == 5
    assert accepted(number=-4).counter_floor == 5  # front: numbered -(counter - 1)
    assert accepted(number=4, counted=False).counter_floor == 0
