"""The scorecard harness: ratios, goal checks and aggregation on hand-made rows of a 2-cell
grid, and one tiny simulated run of the whole pipeline."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.scorecard import goals
from bench.scorecard.__main__ import judge_all
from bench.scorecard.grid import SHAPE, Cell, Farm
from bench.scorecard.report import markdown, plot
from bench.scorecard.runner import POLICIES, Row, Run, run_all, run_one, runs_of
from bench.sim.bounds import exhaustive_batch
from bench.sim.scenario import Scenario, cards_of, initial_models, trace

LOAD_CELL = Cell(SHAPE["poisson80"], Farm("mixed", 4), "N")
"""Mixed farm at 80 %: judged against swarm_like too, on mean latency."""
BURST_CELL = Cell(SHAPE["burst4"], Farm("uniform", 2), "1")
"""Uniform farm, rounds of 4: judged on makespan, not against swarm_like."""
CELLS = (LOAD_CELL, BURST_CELL)
INF = math.inf


@pytest.mark.parametrize(
    ("ours", "other", "lower_better", "expected"),
    [
        (2.0, 4.0, True, 2.0),
        (4.0, 2.0, True, 0.5),
        (2.0, 4.0, False, 0.5),
        (INF, 5.0, True, 0.0),
        (5.0, INF, True, INF),
        (0.0, 0.0, False, 1.0),
        (0.0, 1.0, False, 0.0),
        (INF, INF, True, 1.0),
    ],
)
def test_ratio_is_at_least_one_when_ours_is_at_least_as_good(
    ours: float, other: float, lower_better: bool, expected: float
) -> None:
    assert goals.ratio(ours, other, lower_better) == expected


BASE = {"mean_s": 10.0, "p95_s": 20.0, "round_makespan_s": 30.0, "goodput_per_s": 1.0}
BASE_LOADS = 5.0


def rows_for(cell: Cell, ours: dict[str, float], swarm: dict[str, float]) -> list[Row]:
    """Two seeds of every policy: baselines at BASE (swarm_like as given), ours as given."""
    out: list[Row] = []
    for seed in (0, 1):
        scenario = cell.scenario("quick", seed)
        for policy in POLICIES:
            values = {**BASE, "loads_per_100": BASE_LOADS, "wall_s": 0.1}
            values.update(ours if policy == goals.OURS else {})
            values.update(swarm if policy == goals.SWARM else {})
            out.append({**scenario.__dict__, "policy": policy, "cut": False, **values})
    return out


SLOW_SWARM = {"mean_s": 15.0, "round_makespan_s": 45.0}


@pytest.mark.parametrize(
    ("cell", "ours", "swarm", "missed"),
    [
        (LOAD_CELL, {}, SLOW_SWARM, []),
        (LOAD_CELL, {}, {}, ["mean latency 1.000x swarm_like"]),
        (LOAD_CELL, {"mean_s": 9.0}, {"mean_s": 11.0}, ["mean latency 1.222x swarm_like"]),
        (LOAD_CELL, {"p95_s": 21.0}, SLOW_SWARM, ["p95 latency 0.952x the best baseline"]),
        (LOAD_CELL, {"goodput_per_s": 0.96}, SLOW_SWARM, ["goodput 0.960x the best baseline"]),
        (LOAD_CELL, {"loads_per_100": 7.5}, SLOW_SWARM, ["loads/100 7.5 against 5.0"]),
        (LOAD_CELL, {"round_makespan_s": 99.0}, SLOW_SWARM, []),
        (BURST_CELL, {}, {}, []),
        (BURST_CELL, {"round_makespan_s": 31.5}, {}, ["makespan 0.952x the best baseline"]),
        (BURST_CELL, {"loads_per_100": 7.0}, {}, []),
    ],
)
def test_each_goal_is_checked_on_the_mean_of_the_seeds(
    cell: Cell, ours: dict[str, float], swarm: dict[str, float], missed: list[str]
) -> None:
    other = CELLS[1 - CELLS.index(cell)]
    rows = rows_for(cell, ours, swarm) + rows_for(other, {}, SLOW_SWARM)
    judged = {j.cell: j for j in judge_all(rows, CELLS, "quick")}
    assert judged[other].ok
    failures = judged[cell].failures
    assert len(failures) == len(missed)
    for failure, wanted in zip(failures, missed, strict=True):
        assert failure.startswith(wanted)


def test_a_cut_run_of_ours_fails_its_cell_and_a_cut_baseline_is_left_out() -> None:
    rows = rows_for(LOAD_CELL, {}, SLOW_SWARM) + rows_for(BURST_CELL, {}, {})
    for row in rows:
        cut_ours = row["policy"] == goals.OURS and row["arrival"] == "poisson"
        cut_best = row["policy"] == "ect_greedy" and row["arrival"] == "bursts"
        if cut_ours or (cut_best and row["seed"] == 1):
            row["cut"] = True
        if cut_best and row["seed"] == 0:
            row["mean_s"] = 1.0  # would be the best, but its other seed was cut
    judged = {j.cell: j for j in judge_all(rows, CELLS, "quick")}
    assert judged[LOAD_CELL].failures[0] == "ours did not finish (run cut)"
    assert judged[BURST_CELL].ok


@pytest.mark.parametrize(
    ("cell", "makespan", "swarm_goal"),
    [
        (Cell(SHAPE["sequential"], Farm("mixed", 2), "4N"), False, None),
        (Cell(SHAPE["burst16"], Farm("mixed", 2), "N"), True, None),
        (Cell(SHAPE["batch100"], Farm("flags", 4), "N"), True, goals.MAKESPAN),
        (Cell(SHAPE["batch100"], Farm("uniform", 4), "N"), True, None),
        (Cell(SHAPE["poisson20"], Farm("mixed", 4), "N"), False, None),
        (Cell(SHAPE["poisson50"], Farm("mixed", 4, "lru"), "4N"), False, goals.MEAN),
        (Cell(SHAPE["session"], Farm("mixed", 8), "1"), False, goals.MEAN),
    ],
)
def test_which_cells_are_judged_on_makespan_and_against_swarm_like(
    cell: Cell, makespan: bool, swarm_goal: goals.Metric | None
) -> None:
    assert (goals.MAKESPAN in goals.metrics_of(cell)) is makespan
    assert goals.swarm_metric(cell) == swarm_goal


def test_two_tiny_cells_run_through_the_whole_harness(tmp_path: Path) -> None:
    cells = [Cell(SHAPE["sequential"], Farm("mixed", 2), "N"), BURST_CELL]
    rows = run_all(runs_of(cells, "quick", 1, POLICIES, cap_s=60.0), processes=1)
    assert len(rows) == 2 * len(POLICIES)
    assert not [r for r in rows if r["cut"]]
    judged = judge_all(rows, cells, "quick")
    assert [j.cell for j in judged] == cells
    assert all(len(j.scores) >= 3 and j.scores[0].best_policy in goals.BASELINES for j in judged)
    (tmp_path / "scorecard.md").write_text(markdown(judged, ["Made by a test."]))
    plot(judged, tmp_path / "scorecard.png", "a test")
    assert "## Failing cells" in (tmp_path / "scorecard.md").read_text()
    assert (tmp_path / "scorecard.png").stat().st_size > 0


def test_a_batch_cell_carries_its_lower_bound_and_other_cells_none() -> None:
    batch = Cell(SHAPE["batch100"], Farm("mixed", 4), "N")
    rows = rows_for(batch, {}, SLOW_SWARM) + rows_for(LOAD_CELL, {}, SLOW_SWARM)
    for row in rows:
        row["lower_bound_s"] = 25.0 if row["arrival"] == "batch" else 0.0
    judged = {j.cell: j for j in judge_all(rows, [batch, LOAD_CELL], "quick")}
    assert judged[batch].bound_s == 25.0
    assert math.isnan(judged[LOAD_CELL].bound_s)


def test_ours_on_a_batch_carries_the_offline_planner_between_bound_and_optimum() -> None:
    small = Scenario(farm="1*h200,1*rtx4070ti", k=4, jobs=9, arrival="batch", seed=3)
    ours, swarm = (run_one(Run(small, policy, cap_s=60.0)) for policy in (goals.OURS, goals.SWARM))
    assert "planner_s" not in swarm
    planner = float(str(ours["planner_s"]))
    cards, jobs = cards_of(small.farm, small.k, small.zipf_s), trace(small)
    optimum = exhaustive_batch(cards, jobs, initial_models(small))
    # An achievable schedule: never below the lower bound nor the optimum of its own model.
    assert float(str(ours["lower_bound_s"])) - 1e-9 <= optimum <= planner + 1e-9
    batch = Cell(SHAPE["batch100"], Farm("mixed", 4), "N")
    rows = with_policy(rows_for(batch, {}, SLOW_SWARM), goals.OURS, {"planner_s": 30.0})
    rows += rows_for(LOAD_CELL, {}, SLOW_SWARM)
    judged = {j.cell: j for j in judge_all(rows, [batch, LOAD_CELL], "quick")}
    assert judged[batch].planner_s == 30.0
    assert math.isnan(judged[LOAD_CELL].planner_s)
    assert "| 30.0 | 1.500 |" in markdown(list(judged.values()), ["Made by a test."])


def with_policy(rows: list[Row], policy: str, values: dict[str, float]) -> list[Row]:
    return [{**row, **values} if row["policy"] == policy else row for row in rows]


@pytest.mark.parametrize(
    ("thrifty", "ours_loads", "missed"),
    [
        # affinity_only never loads but serves 50 % slower: not a schedule ours may be.
        ({"loads_per_100": 0.0, "mean_s": 15.0}, 6.9, []),
        # ...within 3 % of the best baseline's mean latency, it sets the bar.
        (
            {"loads_per_100": 0.0, "mean_s": 10.2},
            6.9,
            ["loads/100 6.9 against 0.0 (affinity_only)"],
        ),
        ({"loads_per_100": 0.0, "mean_s": 10.2}, 1.9, []),
        # Without a thriftier peer the bar is the best baseline's own loads.
        ({"loads_per_100": 9.0}, 7.5, ["loads/100 7.5 against 5.0 (round_robin)"]),
    ],
)
def test_the_loads_goal_is_set_by_the_thriftiest_baseline_within_the_floor(
    thrifty: dict[str, float], ours_loads: float, missed: list[str]
) -> None:
    rows = rows_for(LOAD_CELL, {"loads_per_100": ours_loads}, SLOW_SWARM)
    rows = with_policy(rows, "affinity_only", thrifty)
    (judged,) = judge_all(rows, [LOAD_CELL], "quick")
    loads = [f for f in judged.failures if f.startswith("loads")]
    assert len(loads) == len(missed)
    assert all(f.startswith(m) for f, m in zip(loads, missed, strict=True))


BATCH = Cell(SHAPE["batch100"], Farm("mixed", 4), "N")


@pytest.mark.parametrize(
    ("bound_s", "ours_s", "target", "ok"),
    [
        (10.0, 36.0, 1.25, True),  # swarm_like at 45 s is far from the bound: the full 1.25x
        (10.0, 37.0, 1.25, False),
        (40.0, 41.0, 0.97 * 45 / 40, True),  # 45 s against a 40 s bound: 1.09x at most
        (40.0, 42.0, 0.97 * 45 / 40, False),
    ],
)
def test_the_swarm_like_goal_of_a_batch_is_capped_by_its_lower_bound(
    bound_s: float, ours_s: float, target: float, ok: bool
) -> None:
    rows = rows_for(BATCH, {"round_makespan_s": ours_s, "mean_s": 9.0}, SLOW_SWARM)
    # Every baseline as slow as swarm_like on makespan, so only the swarm_like goal is at stake.
    slow = {"round_makespan_s": 45.0, "goodput_per_s": 0.5}
    rows = [{**row, "lower_bound_s": bound_s, **slow} for row in rows]
    rows = with_policy(rows, goals.OURS, {"round_makespan_s": ours_s, "goodput_per_s": 1.0})
    (judged,) = judge_all(rows, [BATCH], "quick")
    assert judged.swarm_target == pytest.approx(target)
    assert judged.ok is ok


def test_the_gateway_cache_mode_launches_each_card_as_the_gateway_would() -> None:
    """An H200 gets `--cache-lru 22` (four SDXL-size checkpoints kept), a 12 GB RTX 4070 Ti
    keeps the classic cache (`workers.comfy.launch_args.plan_launch`)."""
    assert Farm("mixed", 4, "gateway").spec == "2*h200@lru22,2*rtx4070ti"
    assert Farm("uniform", 2, "gateway").spec == "2*h200@lru22"
    assert Farm("mixed", 4, "lru").spec == "2*h200@lru8,2*rtx4070ti@lru8"
