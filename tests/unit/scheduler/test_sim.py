"""A short simulation: the real policies against the emulator's cost model (the long runs are
benchmarks: `python -m bench.sim`)."""

from __future__ import annotations

import pytest

from bench.sim.scenario import Scenario, simulate

SHORT = Scenario(jobs=300, load=0.6, seed=1)


@pytest.mark.parametrize("policy", ["affinity", "swarm_like", "ect_greedy", "round_robin"])
def test_policies_finish_every_job_within_the_contract(policy: str) -> None:
    summary = simulate(SHORT, policy).summary
    assert summary.finished == summary.jobs


def test_affinity_loads_far_less_than_round_robin_and_finishes_sooner() -> None:
    ours = simulate(SHORT, "affinity").summary
    blind = simulate(SHORT, "round_robin").summary
    assert ours.loads_per_100 < 0.5 * blind.loads_per_100
    assert ours.p95_s < blind.p95_s


def test_a_burst_is_planned_close_to_its_lower_bound() -> None:
    outcome = simulate(Scenario(jobs=60, arrival="batch", seed=2), "affinity")
    assert outcome.summary.makespan_s < 1.25 * outcome.lower_bound_s
