"""The live benchmark's cases and what it measures of a replay."""

from __future__ import annotations

import argparse
import asyncio

import numpy as np
import pytest

from bench.live import Farm, Replay, ended_at, measure, parse_case
from bench.sim.scenario import Scenario, trace


def test_a_poisson_case_names_its_load_and_a_batch_case_its_size() -> None:
    poisson, batch = parse_case("poisson50"), parse_case("batch500")
    assert poisson.scenario(300, 2) == Scenario(jobs=300, load=0.5, seed=2)
    assert batch.scenario(300, 2) == Scenario(jobs=500, arrival="batch", seed=2)
    assert batch.metrics[0][1] == "makespan_s"
    assert "goodput_per_s" in [key for _, key in poisson.metrics]


def test_a_closed_loop_case_names_its_jobs_and_rounds_and_runs_on_the_farm_given() -> None:
    quick_start = Farm("2*rtx4070ti", k=4, fresh=True)
    sequential, bursts = parse_case("sequential30"), parse_case("bursts4x8")
    assert sequential.scenario(300, 1, quick_start) == Scenario(
        farm="2*rtx4070ti", k=4, fresh=True, jobs=30, arrival="sequential", seed=1
    )
    assert bursts.scenario(300, 1, quick_start) == Scenario(
        farm="2*rtx4070ti", k=4, fresh=True, jobs=32, arrival="bursts", burst=4, seed=1
    )
    assert sequential.closed and bursts.closed and not parse_case("batch16").closed
    assert [key for _, key in bursts.metrics] == ["mean_s", "p95_s", "loads_per_100", "makespan_s"]


@pytest.mark.parametrize(
    "name",
    [
        "poisson",
        "batch0",
        "burst4",
        "poisson-5",
        "",
        "sequential0",
        "bursts4",
        "bursts0x3",
        "bursts4x",
    ],
)
def test_an_unknown_case_is_refused_by_name(name: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="unknown case"):
        parse_case(name)


def test_a_batch_makespan_runs_from_the_first_send_to_the_last_end_in_unscaled_seconds() -> None:
    scenario = Scenario(jobs=3, arrival="batch", seed=0)
    jobs = trace(scenario)
    replay = Replay(expected=3)
    for i, job in enumerate(jobs):
        replay.sent_s[job.job_id], replay.job_of[job.job_id] = 100.0 + 0.1 * i, job
        replay.ended_s[job.job_id] = 102.0 + i
    measured = measure(replay, scenario, scale=0.5)
    assert measured.makespan_s == pytest.approx((104.0 - 100.0) / 0.5)
    assert measured.finished == 3
    del replay.ended_s[jobs[-1].job_id]
    assert measure(replay, scenario, scale=0.5).makespan_s == np.inf  # one never ended


def test_a_closed_loop_client_waits_until_every_job_it_follows_has_ended() -> None:
    async def scenario() -> tuple[bool, float]:
        replay = Replay(expected=2)
        waiter = asyncio.create_task(ended_at(replay, ["a", "b"]))
        replay.ended_s["a"] = 5.0
        replay.ended.set()
        await asyncio.sleep(0)
        waited = not waiter.done()  # "b" has not ended yet
        replay.ended_s["b"] = 7.0
        replay.ended.set()
        return waited, await asyncio.wait_for(waiter, 1)

    waited, last_s = asyncio.run(scenario())
    assert waited
    assert last_s == 7.0


def test_jobs_a_closed_loop_never_sent_count_as_unfinished() -> None:
    scenario = Scenario(farm="2*rtx4070ti", k=4, jobs=4, arrival="sequential", seed=0)
    jobs = trace(scenario)
    replay = Replay(expected=4)
    for i, job in enumerate(jobs[:2]):  # the budget ran out before the third was sent
        replay.sent_s[job.job_id], replay.job_of[job.job_id] = 10.0 * i, job
        replay.ended_s[job.job_id] = 10.0 * i + 2.0
    measured = measure(replay, scenario, scale=1.0)
    assert (measured.jobs, measured.finished) == (4, 2)
    assert measured.mean_s == np.inf and measured.makespan_s == np.inf
