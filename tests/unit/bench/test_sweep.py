"""bench.sweep: random scenarios the simulator accepts, and a score read off the worst measure."""

from __future__ import annotations

import random

from bench.sim.farm import parse_farm
from bench.sim.scenario import Scenario
from bench.sweep import Scored, draw, measure, report, score


def test_drawn_scenarios_are_reproducible_and_valid() -> None:
    first = [draw(random.Random(7)) for _ in range(3)]
    assert first == [draw(random.Random(7)) for _ in range(3)]
    for scenario in (draw(random.Random(seed)) for seed in range(50)):
        workers = parse_farm(scenario.farm)
        assert 2 <= len(workers) <= 12
        assert 1 <= scenario.k <= 3 * len(workers)


def test_a_tiny_scenario_runs_and_reports_every_measure() -> None:
    scenario = Scenario(farm="1*h200,1*rtx4070ti", k=2, jobs=6, arrival="batch")
    _, policy, values = measure((scenario, "affinity"))
    assert policy == "affinity"
    assert values["makespan_s"] > 0 and values["goodput_per_s"] > 0


def means(ours: dict[str, float], other: dict[str, float]) -> dict[str, dict[str, float]]:
    base = {"mean_s": 2.0, "p95_s": 4.0, "goodput_per_s": 1.0, "makespan_s": 10.0}
    return {
        "affinity": {**base, "loads_per_100": 5.0, **ours},
        "swarm_like": {**base, "loads_per_100": 3.0, **other},
    }


def test_the_score_is_the_worst_measure_lower_is_better_inverted() -> None:
    poisson = Scenario(arrival="poisson")
    scored = score(poisson, means({"p95_s": 5.0, "goodput_per_s": 1.1}, {}))
    assert scored.score == 4.0 / 5.0
    assert scored.worst.startswith("p95_s")
    assert (scored.loads, scored.fewest_loads) == (5.0, 3.0)


def test_the_makespan_counts_only_where_jobs_arrive_together() -> None:
    slow_makespan = means({"makespan_s": 20.0}, {})
    assert score(Scenario(arrival="poisson"), slow_makespan).score == 1.0
    assert score(Scenario(arrival="batch"), slow_makespan).score == 0.5


def test_a_scenario_below_the_floor_is_a_loss_only_if_it_stays_below_on_more_seeds() -> None:
    noisy, lost, fine = (Scenario(arrival="poisson", k=k) for k in (1, 2, 3))
    scored = [
        Scored(noisy, 0.90, "p95_s", 0.0, 0.0),
        Scored(lost, 0.93, "mean_s", 0.0, 0.0),
        Scored(fine, 1.01, "mean_s", 0.0, 0.0),
    ]
    confirmed = {
        noisy: Scored(noisy, 1.02, "p95_s 1.0 against x 1.0", 0.0, 0.0),
        lost: Scored(lost, 0.95, "mean_s 2.0 against y 1.9", 0.0, 0.0),
    }
    text = report(scored, "python -m bench.sweep", 1.0, 3, confirmed, 16)
    assert "1 of 3 at 3 seeds" in text
    assert "still below: 1 of these 2; 2 of 3 within" in text
    assert "| 0.900 | 1.020 (p95_s 1.0 against x 1.0) |" in text
    assert "| 1.010 |  |" in text
