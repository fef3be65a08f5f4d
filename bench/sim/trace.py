"""Job traces: a Zipf catalogue of checkpoints, mixed SD1.5/SDXL shapes, and arrival patterns.

Every generator is a pure function of its arguments and a seeded numpy Generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from workers.emulator.card.costmodel import JobShape

FAMILIES = ("sd15", "sdxl")

# (width, height) with probability, steps with probability, batch with probability.
SIZES = {
    "sd15": (((512, 512), 0.6), ((512, 768), 0.25), ((768, 768), 0.15)),
    "sdxl": (((1024, 1024), 0.7), ((832, 1216), 0.3)),
}
STEPS = {
    "sd15": ((20, 0.5), (30, 0.3), (12, 0.2)),
    "sdxl": ((20, 0.5), (30, 0.3), (8, 0.2)),
}
BATCHES = {"sd15": ((1, 0.85), (2, 0.15)), "sdxl": ((1, 0.9), (2, 0.1))}
THINK_S = (0.0, 5.0)
"""A closed-loop client's think time between a result and its next submission, uniform."""


@dataclass(frozen=True)
class Checkpoint:
    name: str
    family: str
    popularity: float


@dataclass(frozen=True)
class SimJob:
    job_id: str
    arrival_s: float
    shape: JobShape
    follows: tuple[str, ...] = ()
    """Closed loop: released `think_s` after every job named here has finished, and its
    `arrival_s` is then that release time. Empty: it arrives at `arrival_s`."""
    think_s: float = 0.0

    @property
    def work_units(self) -> float:
        """Steps x megapixels x batch, as the gateway computes it from the prompt."""
        return self.shape.steps * self.shape.megapixels * self.shape.batch


def catalogue(k: int, zipf_s: float, families: Sequence[str] = FAMILIES) -> tuple[Checkpoint, ...]:
    """K checkpoints, ranks alternating between families, popularity proportional to
    1 / rank^s."""
    weights = np.array([1.0 / (rank + 1) ** zipf_s for rank in range(k)])
    weights /= weights.sum()
    return tuple(
        Checkpoint(
            f"ckpt{rank:02d}-{families[rank % len(families)]}.safetensors",
            families[rank % len(families)],
            float(weights[rank]),
        )
        for rank in range(k)
    )


def shape_classes(family: str) -> list[tuple[tuple[int, int, int, int], float]]:
    """Every (width, height, steps, batch) of a family with its probability."""
    return [
        ((w, h, steps, batch), ps * pt * pb)
        for (w, h), ps in SIZES[family]
        for steps, pt in STEPS[family]
        for batch, pb in BATCHES[family]
    ]


def _pick(rng: np.random.Generator, table: Sequence[tuple[object, float]]) -> object:
    probs = np.array([p for _, p in table])
    return table[int(rng.choice(len(table), p=probs / probs.sum()))][0]


def draw_shape(rng: np.random.Generator, checkpoint: Checkpoint) -> JobShape:
    size = _pick(rng, SIZES[checkpoint.family])
    steps = _pick(rng, STEPS[checkpoint.family])
    batch = _pick(rng, BATCHES[checkpoint.family])
    assert isinstance(size, tuple) and isinstance(steps, int) and isinstance(batch, int)
    return JobShape(checkpoint.name, checkpoint.family, steps, size[0], size[1], batch)


def draw_checkpoint(rng: np.random.Generator, models: Sequence[Checkpoint]) -> Checkpoint:
    probs = np.array([m.popularity for m in models])
    return models[int(rng.choice(len(models), p=probs / probs.sum()))]


def _jobs(
    rng: np.random.Generator,
    models: Sequence[Checkpoint],
    times: Iterable[float],
    picks: Sequence[Checkpoint] | None = None,
) -> tuple[SimJob, ...]:
    out = []
    for i, at in enumerate(times):
        model = picks[i] if picks is not None else draw_checkpoint(rng, models)
        out.append(SimJob(f"j{i:06d}", float(at), draw_shape(rng, model)))
    return tuple(out)


def poisson(
    models: Sequence[Checkpoint], rate_per_s: float, n: int, seed: int
) -> tuple[SimJob, ...]:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, n))
    return _jobs(rng, models, times)


def bursty(
    models: Sequence[Checkpoint], rate_per_s: float, n: int, seed: int, cv: float = 3.0
) -> tuple[SimJob, ...]:
    """Gamma inter-arrivals with coefficient of variation `cv` (bursts and lulls)."""
    rng = np.random.default_rng(seed)
    shape = 1.0 / cv**2
    times = np.cumsum(rng.gamma(shape, 1.0 / (rate_per_s * shape), n))
    return _jobs(rng, models, times)


def sessions(
    models: Sequence[Checkpoint],
    rate_per_s: float,
    n: int,
    seed: int,
    mean_jobs: float = 5.0,
    think_s: float = 20.0,
) -> tuple[SimJob, ...]:
    """Users iterate on one model: sessions start as a Poisson process, each picks a model by
    popularity and submits a geometric number of jobs, think times exponential."""
    rng = np.random.default_rng(seed)
    events: list[tuple[float, Checkpoint]] = []
    start = 0.0
    while len(events) < n:
        start += rng.exponential(mean_jobs / rate_per_s)
        model = draw_checkpoint(rng, models)
        at = start
        for _ in range(int(rng.geometric(1.0 / mean_jobs))):
            events.append((at, model))
            at += rng.exponential(think_s)
    events.sort(key=lambda e: e[0])
    events = events[:n]
    return _jobs(rng, models, [t for t, _ in events], [m for _, m in events])


def batch(models: Sequence[Checkpoint], n: int, seed: int) -> tuple[SimJob, ...]:
    """n jobs submitted at once (time 0)."""
    rng = np.random.default_rng(seed)
    return _jobs(rng, models, [0.0] * n)


def bursts(
    models: Sequence[Checkpoint],
    size: int,
    n: int,
    seed: int,
    think_s: tuple[float, float] = THINK_S,
) -> tuple[SimJob, ...]:
    """n jobs in rounds of `size` submitted at once by one client: the first round at time 0,
    each next one a think time (uniform in `think_s`) after every job of the previous round
    finished, so each round lands on an idle farm."""
    rng = np.random.default_rng(seed)
    jobs = _jobs(rng, models, [0.0] * n)
    thinks = rng.uniform(think_s[0], think_s[1], -(-n // size))
    out = list(jobs[:size])
    for i in range(size, n):
        start = (i // size - 1) * size
        before = tuple(job.job_id for job in jobs[start : start + size])
        out.append(replace(jobs[i], follows=before, think_s=float(thinks[i // size])))
    return tuple(out)


def sequential(
    models: Sequence[Checkpoint], n: int, seed: int, think_s: tuple[float, float] = THINK_S
) -> tuple[SimJob, ...]:
    """One client sending n jobs one after another: each a think time (uniform in `think_s`)
    after the previous one finished."""
    return bursts(models, 1, n, seed, think_s)


def mix(models: Sequence[Checkpoint]) -> list[tuple[JobShape, float]]:
    """Every job shape of the catalogue with its probability (checkpoint dropped to its family's
    first model, for tables that only care about family and shape)."""
    by_family: dict[str, float] = {}
    for model in models:
        by_family[model.family] = by_family.get(model.family, 0.0) + model.popularity
    out = []
    for family, share in by_family.items():
        for (w, h, steps, b), p in shape_classes(family):
            out.append((JobShape(family, family, steps, w, h, b), share * p))
    return out
