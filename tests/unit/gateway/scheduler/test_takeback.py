"""Taking back a prefetched job for an idle worker: only where it finishes clearly sooner."""

from __future__ import annotations

import pytest

from gateway.scheduler import takeback
from gateway.scheduler.snapshot import JobView, WorkerView
from tests.unit.gateway.scheduler.factories import job, worker

SHORT = job("short", "m1", work=1.0)  # 0.1 s warm at 10 units/s
OTHER = job("other", "m2", work=1.0)


def holder(outstanding_s: float, *queued: JobView, name: str = "busy") -> WorkerView:
    """Runs a long job and holds `queued` behind it (`outstanding_s` counts them too)."""
    return worker(
        name,
        resident=("m1",),
        free=0,
        outstanding=1 + len(queued),
        outstanding_s=outstanding_s,
        queued=tuple(q.model_keys for q in queued),
    )


IDLE_WARM = worker("idle", resident=("m1",), free=2)
IDLE_COLD = worker("idle", resident=(), free=2, load_s=4.0)


@pytest.mark.parametrize(
    ("case", "workers", "queued", "expected"),
    [
        (
            "a short job behind 24 s goes to a warm idle worker",
            [holder(24.1, SHORT), IDLE_WARM],
            {"busy": [SHORT]},
            [("short", "busy", "idle")],
        ),
        (
            "and to a cold one: 4 s of loading still beats 24 s",
            [holder(24.1, SHORT), IDLE_COLD],
            {"busy": [SHORT]},
            [("short", "busy", "idle")],
        ),
        (
            "a holder that frees before a cold card has loaded keeps it",
            [holder(2.1, SHORT), IDLE_COLD],
            {"busy": [SHORT]},
            [],
        ),
        (
            "less than a second gained is not worth a move",
            [holder(0.9, SHORT), IDLE_WARM],
            {"busy": [SHORT]},
            [],
        ),
        (
            "a worker that holds something is not idle",
            [holder(24.1, SHORT), worker("idle", resident=("m1",), free=1, outstanding=1)],
            {"busy": [SHORT]},
            [],
        ),
        (
            "a worker that may not run it is not asked",
            [holder(24.1, job("short", "m1", work=1.0, group="B")), IDLE_WARM],
            {"busy": [job("short", "m1", work=1.0, group="B")]},
            [],
        ),
        (
            "one job per idle worker, the largest gain first",
            [holder(24.2, SHORT, OTHER), IDLE_WARM],
            {"busy": [SHORT, OTHER]},
            [("other", "busy", "idle")],
        ),
        (
            "one job per holder and round, however many are idle",
            [holder(24.2, SHORT, OTHER), IDLE_WARM, worker("idle2", resident=("m2",), free=2)],
            {"busy": [SHORT, OTHER]},
            [("other", "busy", "idle2")],
        ),
        (
            "two holders, two idle workers: one move each",
            [
                holder(24.1, SHORT),
                holder(30.1, OTHER, name="busy2"),
                IDLE_WARM,
                worker("idle2", resident=("m2",), free=2),
            ],
            {"busy": [SHORT], "busy2": [OTHER]},
            [("other", "busy2", "idle2"), ("short", "busy", "idle")],
        ),
    ],
)
def test_take_backs(
    case: str,
    workers: list[WorkerView],
    queued: dict[str, list[JobView]],
    expected: list[tuple[str, str, str]],
) -> None:
    moves = takeback.take_backs(workers, queued)
    assert [(m.job_id, m.holder, m.worker) for m in moves] == expected, case
    assert all(m.gain_s >= takeback.MIN_GAIN_S for m in moves)


def test_finish_times_count_what_runs_ahead_of_each_queued_job() -> None:
    busy = holder(30.2, SHORT, OTHER)
    finish = takeback.finish_times(busy, [SHORT, OTHER])
    # 30.2 s in all: the started job's rest, 0.1 s for SHORT (warm), 4.1 s for OTHER (a load).
    assert finish == pytest.approx({"short": 26.1, "other": 30.2})


@pytest.mark.parametrize(("idle", "reason"), [(IDLE_WARM, "warm"), (IDLE_COLD, "load")])
def test_a_job_taken_back_says_why_as_a_placement_does(idle: WorkerView, reason: str) -> None:
    """`/history`'s `gateway` block says why every job went where it ran: a job taken back
    names its expected finish on the idle worker, and its holder as the runner-up."""
    (move,) = takeback.take_backs([holder(24.1, SHORT), idle], {"busy": [SHORT]})
    why = move.why.as_dict()
    assert why["reason"] == reason and why["runner_up"] == "busy"
    assert why["expected_done_s"] == pytest.approx(takeback.finish_times(idle, [SHORT])["short"])
    assert why["runner_up_done_s"] == pytest.approx(24.1)
