"""The experiments behind `bench/results/sim_*.md`: which scenarios, which policies, how many
seeds. Runs go to a process pool; each result is a plain row (dict) for the report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from multiprocessing import Pool

from bench.sim.bounds import exhaustive_batch, plan_batch
from bench.sim.engine import SimConfig
from bench.sim.scenario import Scenario, cards_of, initial_models, simulate, trace

POLICIES = (
    "affinity",
    "swarm_like",
    "ect_greedy",
    "affinity_only",
    "least_outstanding",
    "round_robin",
    "random",
)
STANDARD_POLICIES = POLICIES
SMART = ("affinity", "swarm_like", "ect_greedy", "affinity_only")
LOADS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)

Row = dict[str, object]


@dataclass(frozen=True)
class Job:
    scenario: Scenario
    policy: str
    learned: bool = False
    """Policies see speeds learned online instead of the fit to the true costs."""


def _run(job: Job) -> Row:
    outcome = simulate(job.scenario, job.policy, SimConfig(learned_speeds=job.learned))
    row: Row = {**asdict(job.scenario), "policy": job.policy, "learned": job.learned}
    row.update(asdict(outcome.summary))
    row["capacity_per_s"] = outcome.capacity_per_s
    row["lower_bound_s"] = outcome.lower_bound_s
    row["wall_s"] = outcome.wall_s
    return row


def run_all(jobs: Sequence[Job], processes: int = 2) -> list[Row]:
    if processes <= 1:
        return [_run(job) for job in jobs]
    with Pool(processes) as pool:
        return pool.map(_run, jobs, chunksize=1)


def grid(policies: Iterable[str], scenarios: Iterable[Scenario], seeds: Iterable[int]) -> list[Job]:
    return [
        Job(replace(scenario, seed=seed), policy)
        for scenario in scenarios
        for policy in policies
        for seed in seeds
    ]


def standard(jobs: int, seeds: int) -> list[Job]:
    """Every policy at every load on the standard scenario."""
    scenarios = [Scenario(load=load, jobs=jobs) for load in LOADS]
    return grid(STANDARD_POLICIES, scenarios, range(seeds))


def stability(jobs: int, seeds: int) -> list[Job]:
    """Long runs: the late-binding policies up to 95 %, the blind ones at 50 %."""
    smart = grid(SMART, [Scenario(load=load, jobs=jobs) for load in (0.8, 0.9, 0.95)], range(seeds))
    blind = grid(
        ("least_outstanding", "round_robin", "random"),
        [Scenario(load=0.5, jobs=jobs)],
        range(seeds),
    )
    return smart + blind


CHEAP = (
    Scenario(farm="standard-lru"),
    Scenario(farm="h200-lru"),
    Scenario(farm="standard", k=4),
    Scenario(farm="uniform4", k=4),
)


def cheap(jobs: int, seeds: int) -> list[Job]:
    """Where residency is cheap: LRU caches, or no more checkpoints than workers."""
    return grid(POLICIES, [replace(s, jobs=jobs) for s in CHEAP], range(seeds))


def traces(jobs: int, seeds: int) -> list[Job]:
    """Other arrival patterns on the standard farm at 80 %."""
    scenarios = [Scenario(arrival=arrival, jobs=jobs) for arrival in ("bursty", "session")]
    return grid(POLICIES, scenarios, range(seeds))


FARM_POLICIES = ("affinity", "swarm_like", "ect_greedy", "least_outstanding")
FARMS = ("uniform2", "mixed2", "uniform4", "mixed4", "uniform8", "mixed8")


def farms(jobs: int, seeds: int) -> list[Job]:
    """Farms of 2, 4, 8 workers (uniform and mixed) x K in {N, 2N, 4N} x Zipf s."""
    scenarios = [
        Scenario(farm=farm, k=k_per * _size(farm), zipf_s=s, jobs=jobs)
        for farm in FARMS
        for k_per in (1, 2, 4)
        for s in (0.6, 1.0, 1.4)
    ]
    return grid(FARM_POLICIES, scenarios, range(seeds))


def _size(farm: str) -> int:
    return int(farm[-1])


def batch(seeds: int) -> list[Job]:
    """200 jobs submitted at once on the standard farm, and a small batch on two cards."""
    big = [Scenario(arrival="batch", jobs=200)]
    small = [Scenario(arrival="batch", jobs=12, farm="mixed2", k=4)]
    return grid(POLICIES, big + small, range(seeds))


def planned_makespans(seeds: int, rounds: int = 20000) -> list[Row]:
    """The offline planner's best makespan (three restarts) for each batch scenario of `batch`,
    and the exhaustive optimum where the batch is small enough."""
    rows: list[Row] = []
    for job in batch(seeds):
        if job.policy != POLICIES[0]:
            continue
        scenario = job.scenario
        cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
        jobs, initial = trace(scenario), initial_models(scenario)
        best = min(plan_batch(cards, jobs, initial, seed=s, rounds=rounds) for s in range(3))
        row: Row = {**asdict(scenario), "planner_s": best}
        if len(cards) ** len(jobs) <= 300_000:
            row["optimum_s"] = exhaustive_batch(cards, jobs, initial)
        rows.append(row)
    return rows


def learned(jobs: int, seeds: int) -> list[Job]:
    """The standard scenario with speeds the policies learn online, against the fitted ones."""
    scenarios = [Scenario(load=load, jobs=jobs) for load in (0.8, 0.95)]
    out = []
    for job in grid(("affinity", "ect_greedy"), scenarios, range(seeds)):
        out += [job, replace(job, learned=True)]
    return out
