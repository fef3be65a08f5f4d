"""bench.quickstart's measures on made-up stamps: queue wait, and waiting while a worker idles."""

from __future__ import annotations

import pytest

from bench.quickstart import Job, Run, idle_waits_s, makespan_s, waits_s


def job(worker: str, enqueued: int, started: int, finished: int) -> Job:
    stamps = {"enqueued": enqueued, "claimed": enqueued, "started": started, "finished": finished}
    return Job("id", "a.safetensors", enqueued / 1000, finished / 1000, "success", worker, stamps)


def test_a_wait_counts_as_idle_only_while_some_worker_runs_nothing() -> None:
    jobs = [job("w0", 0, 0, 4000), job("w1", 0, 1000, 3000), job("w0", 0, 5000, 6000)]
    run = Run("burst", "p", 0, 0.5, jobs, ["w0", "w1"], loads=0)
    assert waits_s(run) == pytest.approx([0.0, 2.0, 10.0])
    # Job 1: both idle from 0 to 1 s. Job 2: every worker busy only from 1 to 3 s, of 5 s.
    assert idle_waits_s(run) == pytest.approx([0.0, 2.0, 6.0])
    assert makespan_s(run) == pytest.approx(12.0)


def test_an_idle_worker_with_no_jobs_makes_every_wait_idle() -> None:
    run = Run("burst", "p", 0, 1.0, [job("w0", 0, 2000, 3000)], ["w0", "w1"], loads=0)
    assert idle_waits_s(run) == pytest.approx([2.0])


def test_jobs_queued_inside_one_worker_count_its_busy_time_once() -> None:
    """An early binder sends two jobs to w0 at once; ComfyUI stamps both started at 0. w0 is
    busy 0-6 s, w1 0-2 s: the third job, waiting 0-4 s, waited 2 s with w1 idle, never a
    negative time."""
    jobs = [job("w0", 0, 0, 3000), job("w0", 0, 0, 6000), job("w1", 0, 4000, 5000)]
    jobs.append(job("w1", 0, 0, 2000))
    run = Run("mixed", "p", 0, 1.0, jobs, ["w0", "w1"], loads=0)
    assert idle_waits_s(run) == pytest.approx([0.0, 0.0, 2.0, 0.0])
