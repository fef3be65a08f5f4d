"""Simulated runs of every policy on every cell, on a process pool; each a plain row (dict).

A run that passes `cap_s` seconds of wall time is cut (a policy too slow to decide at that size
has no result), and one that breaks the policy contract is recorded with its error; both count
as missing for that policy. Ours on a batch of at most PLANNER_MAX_JOBS jobs also carries the
offline planner's makespan for the same batch (`planner_s`): what a schedule made with the
whole batch and every true cost known in advance reaches, to read the batch goals beside.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from multiprocessing import Pool

from bench.deadline import Overrun, deadline
from bench.scorecard.goals import BASELINES, OURS
from bench.scorecard.grid import Cell, at_seeds
from bench.sim.bounds import plan_batch
from bench.sim.scenario import Scenario, cards_of, initial_models, simulate, trace

POLICIES = (OURS, *BASELINES)
Row = dict[str, object]
PLANNER_MAX_JOBS = 500
"""Larger batches get no planner: one search of 2,000 jobs takes minutes."""
PLANNER_ROUNDS = 20_000


@dataclass(frozen=True)
class Run:
    scenario: Scenario
    policy: str
    cap_s: float


def run_one(run: Run) -> Row:
    row: Row = {**asdict(run.scenario), "policy": run.policy, "cut": False, "error": ""}
    began = time.perf_counter()
    try:
        with deadline(run.cap_s):
            outcome = simulate(run.scenario, run.policy)
    except Overrun:
        return {**row, "cut": True, "wall_s": time.perf_counter() - began}
    except Exception as exc:  # a broken policy (ContractError, StallError) is a result
        return {**row, "cut": True, "error": repr(exc), "wall_s": time.perf_counter() - began}
    summary = asdict(outcome.summary)
    row = {**row, **summary, "lower_bound_s": outcome.lower_bound_s, "wall_s": outcome.wall_s}
    scenario = run.scenario
    if run.policy == OURS and scenario.arrival == "batch" and scenario.jobs <= PLANNER_MAX_JOBS:
        row["planner_s"] = planned_s(scenario)
    return row


def planned_s(scenario: Scenario) -> float:
    """The offline planner's makespan of the scenario's batch (one annealed search, seeded by
    the scenario): an achievable schedule, so no lower bound, but one no online policy is given
    the knowledge for."""
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    jobs, initial = trace(scenario), initial_models(scenario)
    return plan_batch(cards, jobs, initial, seed=scenario.seed, rounds=PLANNER_ROUNDS)


def runs_of(
    cells: Sequence[Cell], grid_name: str, seeds: int, policies: Sequence[str], cap_s: float
) -> list[Run]:
    """Every policy on every cell and seed, the biggest runs first (so none is left last)."""
    runs = [
        Run(scenario, policy, cap_s)
        for cell in cells
        for scenario in at_seeds(cell, grid_name, seeds)
        for policy in policies
    ]
    return sorted(runs, key=lambda r: (-r.scenario.jobs, r.policy != OURS))


def run_all(runs: Sequence[Run], processes: int) -> list[Row]:
    rows: list[Row] = []
    if processes <= 1:
        for run in runs:
            rows.append(_noted(run_one(run), len(rows), len(runs)))
        return rows
    with Pool(processes) as pool:
        for row in pool.imap_unordered(run_one, runs, chunksize=1):
            rows.append(_noted(row, len(rows), len(runs)))
    return rows


def _noted(row: Row, done: int, total: int) -> Row:
    what = "cut" if row["cut"] else f"{float(str(row['wall_s'])):.1f} s"
    print(
        f"[{done + 1}/{total}] {row['policy']} {row['arrival']} {row['jobs']} jobs "
        f"on {row['farm']} K={row['k']}: {what}",
        file=sys.stderr,
    )
    return row


def key_of(scenario: Scenario) -> tuple[object, ...]:
    """What tells the cells' scenarios apart (all but the seed)."""
    return (
        scenario.farm,
        scenario.k,
        scenario.load,
        scenario.jobs,
        scenario.arrival,
        scenario.burst,
    )


def row_key(row: Row) -> tuple[object, ...]:
    return tuple(row[k] for k in ("farm", "k", "load", "jobs", "arrival", "burst"))


def rows_by_cell(
    rows: Sequence[Row], cells: Sequence[Cell], grid_name: str
) -> dict[Cell, list[Row]]:
    by_key = {key_of(cell.scenario(grid_name, 0)): cell for cell in cells}
    out: dict[Cell, list[Row]] = {cell: [] for cell in cells}
    for row in rows:
        out[by_key[row_key(row)]].append(row)
    return out
