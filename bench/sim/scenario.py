"""A scenario (farm, catalogue, arrivals, load, seed) and one simulated run of a policy on it."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from functools import cache

from bench.sim.bounds import batch_lower_bound_s, capacity_per_s, warm_best_s
from bench.sim.costs import Card, make_card
from bench.sim.engine import SimConfig, Simulator
from bench.sim.farm import parse_farm
from bench.sim.metrics import Summary, summarise
from bench.sim.trace import (
    SimJob,
    batch,
    bursts,
    bursty,
    catalogue,
    mix,
    poisson,
    sequential,
    sessions,
)
from gateway.scheduler import affinity
from gateway.scheduler.policy import Policy, make_policy, slots_per_worker

ARRIVALS = ("poisson", "bursty", "session", "batch", "bursts", "sequential")


@dataclass(frozen=True)
class Scenario:
    farm: str = "standard"
    k: int = 8
    zipf_s: float = 1.0
    load: float = 0.8
    """Offered load as a fraction of the capacity bound (ignored for batches, bursts and
    sequential clients)."""
    jobs: int = 2000
    arrival: str = "poisson"
    seed: int = 0
    burst: int = 1
    """Jobs per round for `bursts` arrivals (each round on an idle farm)."""
    fresh: bool = False
    """The farm as `serve` starts it with nothing preloaded: every worker empty and cold (its
    first job pays its card's first use). Otherwise worker i holds the i-th most popular
    checkpoint, warmed up."""


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    policy: str
    summary: Summary
    capacity_per_s: float
    lower_bound_s: float
    wall_s: float
    calls: int


@cache
def cards_of(farm: str, k: int, zipf_s: float) -> tuple[Card, ...]:
    shapes = mix(catalogue(k, zipf_s))
    return tuple(make_card(spec, shapes) for spec in parse_farm(farm))


def capacity(scenario: Scenario) -> float:
    return capacity_per_s(
        cards_of(scenario.farm, scenario.k, scenario.zipf_s),
        mix(catalogue(scenario.k, scenario.zipf_s)),
    )


def trace(scenario: Scenario) -> tuple[SimJob, ...]:
    models = catalogue(scenario.k, scenario.zipf_s)
    rate = scenario.load * capacity(scenario)
    if scenario.arrival == "poisson":
        return poisson(models, rate, scenario.jobs, scenario.seed)
    if scenario.arrival == "bursty":
        return bursty(models, rate, scenario.jobs, scenario.seed)
    if scenario.arrival == "session":
        return sessions(models, rate, scenario.jobs, scenario.seed)
    if scenario.arrival == "batch":
        return batch(models, scenario.jobs, scenario.seed)
    if scenario.arrival == "bursts":
        return bursts(models, scenario.burst, scenario.jobs, scenario.seed)
    if scenario.arrival == "sequential":
        return sequential(models, scenario.jobs, scenario.seed)
    raise ValueError(f"unknown arrival pattern {scenario.arrival!r}; known: {ARRIVALS}")


def initial_models(scenario: Scenario) -> dict[str, str]:
    """Pre-warmed farm: worker i holds the i-th most popular checkpoint (mod K); a fresh one
    holds nothing."""
    if scenario.fresh:
        return {}
    models = catalogue(scenario.k, scenario.zipf_s)
    specs = parse_farm(scenario.farm)
    return {spec.name: models[i % len(models)].name for i, spec in enumerate(specs)}


def build_policy(name: str) -> Policy:
    """A registered policy by name; `affinity[age_scale_s=5,patience=2]` tunes ours."""
    base, _, rest = name.partition("[")
    if not rest:
        return make_policy(name)
    if base != "affinity":
        raise ValueError("only affinity takes parameters")
    defaults = affinity.Tuning()
    known = {f.name for f in fields(affinity.Tuning)}
    values: dict[str, object] = {}
    for item in rest.rstrip("]").split(","):
        key, _, value = item.partition("=")
        if key not in known:
            raise ValueError(f"unknown tuning {key!r}; known: {sorted(known)}")
        values[key] = type(getattr(defaults, key))(float(value))
    tuning = replace(defaults, **values)  # type: ignore[arg-type]
    return affinity.AffinityPolicy(tuning=tuning, name=name)


DEFAULT_CONFIG = SimConfig()


def simulate(scenario: Scenario, policy_name: str, config: SimConfig = DEFAULT_CONFIG) -> Outcome:
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    jobs = trace(scenario)
    models = catalogue(scenario.k, scenario.zipf_s)
    initial = initial_models(scenario)
    policy = build_policy(policy_name)
    slots = slots_per_worker(policy, config.slots)
    sim = Simulator(policy, cards, {m.name: m.family for m in models}, initial, config, slots)
    began = time.perf_counter()
    result = sim.run(jobs)
    wall = time.perf_counter() - began
    best = [warm_best_s(cards, job.shape) for job in jobs]
    summary = summarise(result, best)
    bound = batch_lower_bound_s(cards, jobs, initial) if scenario.arrival == "batch" else 0.0
    return Outcome(scenario, policy_name, summary, capacity(scenario), bound, wall, result.calls)
