"""Bounds to judge policies by: the capacity bound, per-job warm times, batch makespan bounds.

- capacity: jobs per second the farm sustains with every job warm (no loads), each card
  given the job kinds it is best at (a linear program over card x job shape).
- warm_best_s: a job's warm time on the fastest card (latency cannot be lower).
- batch_lower_bound_s: no schedule of a batch submitted at once finishes sooner: the same
  program with the batch's jobs, plus one load of every model no card holds at the start
  (from disk: nothing has read it yet), and no job sooner than its own best cold-or-warm time.
- plan_batch: the best schedule an offline planner finds (local search over which card runs
  which jobs; each card runs its models in blocks, the one it holds first); exhaustive_batch:
  the optimum of that schedule model, for batches small enough to try every assignment.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from bench.sim.costs import Card
from bench.sim.lp import maximise
from bench.sim.trace import SimJob
from workers.emulator.card.costmodel import JobShape, LoadTier


def capacity_per_s(cards: Sequence[Card], shapes: Sequence[tuple[JobShape, float]]) -> float:
    """Jobs per second at the mix `shapes`, every job warm, best split of kinds over cards."""
    g, c = len(cards), len(shapes)
    # variables: y[g, c] jobs/s of shape c on card g, then lambda
    n = g * c + 1
    rows, rhs = [], []
    for i, card in enumerate(cards):
        row = np.zeros(n)
        row[i * c : (i + 1) * c] = [card.warm_s(shape) for shape, _ in shapes]
        rows.append(row)
        rhs.append(1.0)
    for j, (_, p) in enumerate(shapes):
        row = np.zeros(n)
        row[j : g * c : c] = -1.0
        row[-1] = p
        rows.append(row)
        rhs.append(0.0)
    objective = np.zeros(n)
    objective[-1] = 1.0
    value, _ = maximise(objective, np.array(rows), np.array(rhs))
    return value


def warm_best_s(cards: Sequence[Card], shape: JobShape) -> float:
    return min(card.warm_s(shape) for card in cards)


def _cold_or_warm_s(card: Card, job: SimJob, initial: dict[str, str]) -> float:
    """The job alone on the card: warm if it holds the model at the start, else after a load."""
    held = initial.get(card.spec.name) == job.shape.checkpoint
    load = 0.0 if held else card.load_s(job.shape.family, LoadTier.DISK)
    return load + card.warm_s(job.shape)


def batch_lower_bound_s(
    cards: Sequence[Card], jobs: Sequence[SimJob], initial: dict[str, str]
) -> float:
    """A lower bound on the makespan of `jobs`, all submitted at time 0."""
    kinds: dict[JobShape, int] = defaultdict(int)
    families: dict[str, str] = {}
    for job in jobs:
        kinds[_kind(job.shape)] += 1
        families[job.shape.checkpoint] = job.shape.family
    held = set(initial.values())
    cold = [m for m in families if m not in held]
    shapes = list(kinds)
    g, c, k = len(cards), len(shapes), len(cold)
    n = g * c + g * k + 1  # y[g, c] (scaled), z[g, m] loads (scaled), theta = 1 / makespan
    rows, rhs = [], []
    for i, card in enumerate(cards):
        row = np.zeros(n)
        row[i * c : (i + 1) * c] = [card.warm_s(s) for s in shapes]
        row[g * c + i * k : g * c + (i + 1) * k] = [
            card.load_s(families[m], LoadTier.DISK) for m in cold
        ]
        rows.append(row)
        rhs.append(1.0)
    for j, shape in enumerate(shapes):
        row = np.zeros(n)
        row[j : g * c : c] = -1.0
        row[-1] = kinds[shape]
        rows.append(row)
        rhs.append(0.0)
    for m in range(k):
        row = np.zeros(n)
        row[g * c + m : g * c + g * k : k] = -1.0
        row[-1] = 1.0
        rows.append(row)
        rhs.append(0.0)
    objective = np.zeros(n)
    objective[-1] = 1.0
    theta, _ = maximise(objective, np.array(rows), np.array(rhs))
    single = max(min(_cold_or_warm_s(card, job, initial) for card in cards) for job in jobs)
    return max(1.0 / theta, single)


def _kind(shape: JobShape) -> JobShape:
    return JobShape("", shape.family, shape.steps, shape.width, shape.height, shape.batch)


def schedule_s(
    cards: Sequence[Card], jobs: Sequence[SimJob], owner: Sequence[int], initial: dict[str, str]
) -> list[float]:
    """Per card: the seconds of its jobs run model by model, the model it holds first; each
    other model loaded once (from disk, as nothing has read it yet)."""
    total = [0.0] * len(cards)
    models: list[dict[str, str]] = [{} for _ in cards]
    for job, i in zip(jobs, owner, strict=True):
        total[i] += cards[i].warm_s(job.shape)
        models[i][job.shape.checkpoint] = job.shape.family
    for i, card in enumerate(cards):
        for model, family in models[i].items():
            if initial.get(card.spec.name) != model:
                total[i] += card.load_s(family, LoadTier.DISK)
    return total


def plan_batch(
    cards: Sequence[Card],
    jobs: Sequence[SimJob],
    initial: dict[str, str],
    seed: int = 0,
    rounds: int = 20000,
) -> float:
    """The best makespan a local search finds (an achievable schedule, so an upper bound on the
    optimum): start from each job on its fastest card, then move single jobs or whole model
    blocks off the busiest card while the makespan falls (annealed)."""
    rng = np.random.default_rng(seed)
    owner = [min(range(len(cards)), key=lambda i: cards[i].warm_s(j.shape)) for j in jobs]
    loads = schedule_s(cards, jobs, owner, initial)
    best = max(loads)
    best_owner = list(owner)
    temperature = best * 0.02
    for step in range(rounds):
        busiest = int(np.argmax(loads))
        mine = [x for x, o in enumerate(owner) if o == busiest]
        if not mine:
            break
        pick = mine[int(rng.integers(len(mine)))]
        target = int(rng.integers(len(cards)))
        moving = [pick]
        if rng.random() < 0.5:
            model = jobs[pick].shape.checkpoint
            moving = [x for x in mine if jobs[x].shape.checkpoint == model]
        trial = list(owner)
        for x in moving:
            trial[x] = target
        trial_loads = schedule_s(cards, jobs, trial, initial)
        delta = max(trial_loads) - max(loads)
        t = temperature * (1.0 - step / rounds) + 1e-9
        if delta <= 0 or rng.random() < np.exp(-delta / t):
            owner, loads = trial, trial_loads
            if max(loads) < best:
                best, best_owner = max(loads), list(owner)
    del best_owner
    return best


def exhaustive_batch(
    cards: Sequence[Card], jobs: Sequence[SimJob], initial: dict[str, str]
) -> float:
    """The optimal makespan of a small batch: every assignment of jobs to cards tried (each
    card runs its models in blocks, the one it holds first, as in `schedule_s`)."""
    if len(cards) ** len(jobs) > 300_000:
        raise ValueError("too many assignments to try them all")
    return min(
        max(schedule_s(cards, jobs, owner, initial))
        for owner in itertools.product(range(len(cards)), repeat=len(jobs))
    )
