"""What each simulated card costs, straight from the emulator's cost model (`job_phases`), and
the speed estimates the policies are given.

Policies see per-family speeds fitted by weighted least squares (run = fixed + work / speed) to
the true warm times of the trace's job shapes: what an online learner of the same form
converges to. They do not see per-job true times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bench.sim.farm import WorkerSpec
from gateway.learning.learn import cache_slots
from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import CostModel, JobShape, LoadTier, job_phases
from workers.emulator.card.profiles import load_profile


@dataclass
class Card:
    """One simulated instance's cost model with memoised warm times."""

    spec: WorkerSpec
    model: CostModel
    speed: dict[str, float] = field(default_factory=dict)
    fixed_s: dict[str, float] = field(default_factory=dict)
    _warm: dict[JobShape, float] = field(default_factory=dict)

    @cached_property
    def cache_slots(self) -> int:
        """How many checkpoints the gateway believes the instance keeps
        (`gateway.learning.learn.cache_slots`, from its flags and its card's VRAM): under
        `--cache-lru 8` one, as ComfyUI keeps them, not eight. Asked per decision and per
        queued job: worked out once."""
        return cache_slots(self.spec.flags, self.model.profile.vram_total_mib, launched=False)

    def warm_s(self, shape: JobShape) -> float:
        key = JobShape("", shape.family, shape.steps, shape.width, shape.height, shape.batch)
        seconds = self._warm.get(key)
        if seconds is None:
            phases = job_phases(self.model, key, load_tier=None, first_job=False)
            seconds = self._warm[key] = phases.total_s
        return seconds

    def load_s(self, family: str, tier: LoadTier) -> float:
        return self.model.load_s(family, tier)


def make_card(spec: WorkerSpec, shapes: Sequence[tuple[JobShape, float]]) -> Card:
    model = CostModel(load_profile(spec.profile), LaunchFlags.parse(spec.flags))
    card = Card(spec, model)
    for family in {shape.family for shape, _ in shapes}:
        rows = [(s, p) for s, p in shapes if s.family == family]
        work = np.array([s.steps * s.megapixels * s.batch for s, _ in rows])
        secs = np.array([card.warm_s(s) for s, _ in rows])
        weights = np.sqrt(np.array([p for _, p in rows]))
        design = np.column_stack([np.ones_like(work), work]) * weights[:, None]
        (fixed, per_unit), *_ = np.linalg.lstsq(design, secs * weights, rcond=None)
        card.fixed_s[family] = max(float(fixed), 0.0)
        card.speed[family] = 1.0 / max(float(per_unit), 1e-6)
    return card
