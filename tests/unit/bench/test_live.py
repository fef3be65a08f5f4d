"""The live benchmark's cases and what it measures of a replay."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from bench.live import Replay, measure, parse_case
from bench.sim.scenario import Scenario, trace


def test_a_poisson_case_names_its_load_and_a_batch_case_its_size() -> None:
    poisson, batch = parse_case("poisson50"), parse_case("batch500")
    assert poisson.scenario(300, 2) == Scenario(jobs=300, load=0.5, seed=2)
    assert batch.scenario(300, 2) == Scenario(jobs=500, arrival="batch", seed=2)
    assert batch.metrics[0][1] == "makespan_s"
    assert "goodput_per_s" in [key for _, key in poisson.metrics]


@pytest.mark.parametrize("name", ["poisson", "batch0", "burst4", "poisson-5", ""])
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
