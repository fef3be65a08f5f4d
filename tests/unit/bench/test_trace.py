"""Arrival shapes of the simulator's traces: closed-loop clients and bursts on an idle farm."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.sim.engine import SimConfig, Simulator
from bench.sim.metrics import round_makespan
from bench.sim.scenario import Scenario, build_policy, cards_of, initial_models, simulate, trace
from bench.sim.trace import THINK_S, bursts, catalogue, sequential

MODELS = catalogue(4, 1.0)


def test_a_sequential_client_sends_each_job_after_the_previous_one() -> None:
    jobs = sequential(MODELS, 6, seed=1)
    assert jobs[0].follows == ()
    for before, job in itertools.pairwise(jobs):
        assert job.follows == (before.job_id,)
        assert THINK_S[0] <= job.think_s <= THINK_S[1]


@pytest.mark.parametrize(("size", "n", "rounds"), [(2, 6, [2, 2, 2]), (4, 10, [4, 4, 2])])
def test_bursts_come_in_rounds_each_after_the_whole_previous_round(
    size: int, n: int, rounds: list[int]
) -> None:
    jobs = bursts(MODELS, size, n, seed=2)
    assert len(jobs) == n
    start = 0
    previous: tuple[str, ...] = ()
    for count in rounds:
        members = jobs[start : start + count]
        assert all(job.follows == previous for job in members)
        assert len({job.think_s for job in members}) == 1
        previous = tuple(job.job_id for job in members)
        start += count


def test_a_closed_loop_job_arrives_its_think_time_after_the_previous_one_finished() -> None:
    scenario = Scenario(farm="mixed2", k=4, jobs=6, arrival="sequential", seed=3)
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    families = {m.name: m.family for m in catalogue(scenario.k, scenario.zipf_s)}
    config = SimConfig()
    policy = build_policy("least_outstanding")
    sim = Simulator(policy, cards, families, initial_models(scenario), config, config.slots)
    result = sim.run(trace(scenario))
    records = sorted(result.records, key=lambda r: r.job.job_id)
    assert all(r.end_s == r.end_s for r in records)  # every job ran
    for before, record in itertools.pairwise(records):
        assert record.job.arrival_s == pytest.approx(before.end_s + record.job.think_s)


@pytest.mark.parametrize(
    ("arrivals", "ends", "expected"),
    [
        ([0.0, 0.0, 5.0], [3.0, 4.0, 6.0], 2.5),
        ([0.0, 0.0], [1.0, 2.0], 2.0),
        ([1.0, 2.0], [3.0, np.inf], np.inf),
    ],
)
def test_round_makespan_is_the_mean_over_jobs_that_arrived_together(
    arrivals: list[float], ends: list[float], expected: float
) -> None:
    assert round_makespan(np.array(arrivals), np.array(ends)) == expected


def test_a_single_batch_round_makespan_is_its_makespan() -> None:
    summary = simulate(Scenario(farm="mixed2", k=4, jobs=8, arrival="batch"), "swarm_like").summary
    assert summary.round_makespan_s == pytest.approx(summary.makespan_s)
