"""When a waiting prompt may overtake one already sent ahead to a busy worker."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.dispatch.dispatcher import overtakes
from gateway.jobs.models import JobRecord, JobState, Placement


def job(
    number: float, *, priority: int = 0, enqueued_at_ms: int = 0, claimed_at_ms: int = 0
) -> JobRecord:
    return JobRecord(
        job_id=f"j{number}",
        state=JobState.PENDING,
        number=number,
        priority=priority,
        client_id=None,
        prompt_json="{}",
        extra_json="{}",
        outputs_json="[]",
        targets_json=None,
        placement=Placement(),
        attempt=0,
        failures=0,
        worker=None,
        enqueued_at_ms=enqueued_at_ms,
        claimed_at_ms=claimed_at_ms or None,
        started_at_ms=None,
        finished_at_ms=None,
        error=None,
    )


PREFETCHED = job(5, enqueued_at_ms=100, claimed_at_ms=200)


@pytest.mark.parametrize(
    ("waiting", "expected"),
    [
        (job(-6, enqueued_at_ms=300), True),  # front, sent after the prefetch
        (job(7.5, priority=1, enqueued_at_ms=300), True),  # a higher priority
        (job(2, enqueued_at_ms=200), True),  # a lower number in the same millisecond
        (job(6, enqueued_at_ms=300), False),  # behind it
        (job(-6, enqueued_at_ms=150), False),  # was waiting when the policy chose
    ],
)
def test_a_later_job_ahead_in_the_queue_overtakes_a_prefetched_one(
    waiting: JobRecord, expected: bool
) -> None:
    assert overtakes(waiting, PREFETCHED) is expected


def test_a_job_enqueued_while_the_prefetch_was_being_claimed_overtakes_it() -> None:
    # The round read the queue at 120 and claimed at 200: the job enqueued at 150 went unseen.
    assert overtakes(job(-6, enqueued_at_ms=150), PREFETCHED, chosen_at_ms=120)
    assert not overtakes(job(-6, enqueued_at_ms=110), PREFETCHED, chosen_at_ms=120)


def test_the_score_orders_by_priority_then_number() -> None:
    assert job(100, priority=1).score < job(-5).score < job(3).score
    assert replace(job(3), number=2.5).score < job(3).score
