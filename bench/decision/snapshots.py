"""The snapshots a decision is timed on: a queue, a farm and a catalogue of a given size, in a
fresh burst or in steady state, built as the dispatcher builds them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from bench.sim.costs import Card, make_card
from bench.sim.farm import WorkerSpec, parse_farm
from bench.sim.trace import Checkpoint, catalogue, mix, shape_classes
from gateway.scheduler import queue
from gateway.scheduler.cost import run_s, touch
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView
from workers.emulator.card.costmodel import LoadTier

CASES = ("burst", "steady")
CARDS = ("h200", "rtx4070ti", "h200@lru8", "rtx4070ti")
"""Worker i is CARDS[i % 4]: fast and slow cards, one in four with `--cache-lru 8`."""
ZIPF_S = 1.0
NOW_S = 10_000.0
BURST_SPAN_S = 1.0
"""A burst's jobs arrived within this many seconds before the decision."""
STEADY_SPAN_S = 600.0
"""In steady state the waiting jobs arrived over the last ten minutes."""
SLOTS = 2
"""Every policy is timed on the same snapshot: two slots per worker (running + prefetched), as
the dispatcher gives a late-binding policy."""


@dataclass(frozen=True)
class Size:
    jobs: int
    workers: int
    models: int

    @property
    def label(self) -> str:
        return f"{self.jobs:,} x {self.workers} x {self.models}"


SIZES = (
    Size(10, 2, 1),
    Size(100, 2, 8),
    Size(100, 8, 8),
    Size(1_000, 8, 8),
    Size(1_000, 64, 64),
    Size(1_000, 256, 8),
    Size(10_000, 8, 8),
    Size(10_000, 64, 1),
    Size(10_000, 8, 256),
    Size(10_000, 64, 64),
    Size(10_000, 256, 64),
    Size(100_000, 64, 64),
    Size(100_000, 256, 256),
)
QUICK_SIZES = (Size(10, 2, 1), Size(100, 8, 8))
TARGETS_MS = {Size(10_000, 64, 64): 2.0, Size(100_000, 256, 256): 20.0}
"""p99 of one decision by `affinity` (issue 9, "The whole queue, in one view, cheaply")."""


@cache
def card_of(spec: str, models: int) -> Card:
    worker = parse_farm(f"1*{spec}")[0]
    return make_card(WorkerSpec(spec, worker.profile, worker.flags), mix(catalogue(models, ZIPF_S)))


def waiting_jobs(size: Size, span_s: float, rng: np.random.Generator) -> list[JobView]:
    """`size.jobs` jobs over a Zipf catalogue with the simulator's mix of shapes."""
    models = catalogue(size.models, ZIPF_S)
    popularity = np.array([m.popularity for m in models])
    picks = rng.choice(len(models), size=size.jobs, p=popularity / popularity.sum())
    arrivals = np.sort(NOW_S - rng.uniform(0.0, span_s, size.jobs))
    units = work_units(models, picks, rng)
    return [
        JobView(
            job_id=f"j{i:06d}",
            enqueued_at_s=float(at),
            model_keys=frozenset((models[pick].name,)),
            checkpoint=models[pick].name,
            family=models[pick].family,
            work_units=float(work),
            score=float(at),
        )
        for i, (at, pick, work) in enumerate(zip(arrivals, picks, units, strict=True))
    ]


def work_units(
    models: Sequence[Checkpoint], picks: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Steps x megapixels x batch of a job of each picked model, drawn from its family's mix."""
    out = np.zeros(len(picks))
    families = np.array([models[pick].family for pick in picks])
    for family in sorted(set(families.tolist())):  # in order: the draws do not hang on hashing
        table = shape_classes(family)
        units = np.array([steps * w * h * b / float(1 << 20) for (w, h, steps, b), _ in table])
        probs = np.array([p for _, p in table])
        mask = families == family
        out[mask] = units[rng.choice(len(table), size=int(mask.sum()), p=probs / probs.sum())]
    return out


def idle_worker(i: int, size: Size, rng: np.random.Generator) -> WorkerView:
    """Worker i, idle, holding the (i mod K)-th checkpoint (and the next ones where its cache
    keeps several)."""
    spec = CARDS[i % len(CARDS)]
    card = card_of(spec, size.models)
    models = catalogue(size.models, ZIPF_S)
    held = tuple(models[(i + j) % len(models)].name for j in range(card.cache_slots))
    resident = tuple(dict.fromkeys(held))
    return WorkerView(
        name=f"w{i:03d}-{spec}",
        free_slots=SLOTS,
        resident=resident,
        last_checkpoint=resident[0],
        speed=card.speed,
        load_s=load_view(card, models, resident),
        idle_since_s=NOW_S - float(rng.uniform(1.0, 60.0)),
        cache_slots=card.cache_slots,
        fixed_s=card.fixed_s,
    )


def load_view(
    card: Card, models: Sequence[Checkpoint], resident: tuple[str, ...]
) -> dict[str, float]:
    """Expected load seconds per checkpoint: from the page cache for what it holds (a reload),
    from disk for the rest (as `Simulator.load_view` gives them)."""
    return {
        m.name: card.load_s(m.family, LoadTier.PAGE_CACHE if m.name in resident else LoadTier.DISK)
        for m in models
    }


def busy(worker: WorkerView, prefetched: JobView, rng: np.random.Generator) -> WorkerView:
    """The worker part way through a job of its model, `prefetched` queued behind it."""
    remaining_s = float(rng.uniform(0.0, 1.0)) * run_s(prefetched, worker)
    warm = prefetched.model_keys <= set(worker.resident)
    load = 0.0 if warm else sum(worker.load_s[key] for key in prefetched.model_keys)
    return replace(
        worker,
        free_slots=0,
        outstanding=SLOTS,
        outstanding_s=remaining_s + load + run_s(prefetched, worker),
        idle_since_s=None,
        queued=(prefetched.model_keys,),
    )


def freed(worker: WorkerView, started: JobView) -> WorkerView:
    """The worker that has just finished a job and started its prefetched `started`."""
    return replace(
        worker,
        free_slots=SLOTS - 1,
        outstanding=1,
        outstanding_s=run_s(started, worker),
        resident=touch(worker.resident, started.model_keys, worker.cache_slots),
        last_checkpoint=started.checkpoint,
        idle_since_s=None,
    )


def workers_for(
    case: str, size: Size, jobs: Sequence[JobView], rng: np.random.Generator
) -> tuple[WorkerView, ...]:
    idle = [idle_worker(i, size, rng) for i in range(size.workers)]
    if case == "burst":
        return tuple(idle)
    picks = rng.integers(0, len(jobs), size.workers)
    rest = zip(idle[1:], picks[1:], strict=True)
    return (freed(idle[0], jobs[picks[0]]), *(busy(w, jobs[pick], rng) for w, pick in rest))


def build_snapshot(case: str, size: Size, seed: int = 0) -> Snapshot:
    """The snapshot the dispatcher would hand the policy in `case` at `size`."""
    rng = np.random.default_rng(seed)
    span_s = BURST_SPAN_S if case == "burst" else STEADY_SPAN_S
    jobs = waiting_jobs(size, span_s, rng)
    groups = queue.group_jobs(jobs)
    models = catalogue(size.models, ZIPF_S)
    rate_per_s = size.jobs / span_s
    return Snapshot(
        now_s=NOW_S,
        jobs=queue.heads_in_order(groups),
        workers=workers_for(case, size, jobs, rng),
        demand_per_s={m.name: m.popularity * rate_per_s for m in models},
        groups=groups,
    )
