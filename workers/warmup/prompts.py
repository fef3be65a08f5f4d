"""The warm-up prompt: a tiny txt2img run that loads a checkpoint before clients see a worker.

It touches everything a first job pays for (reading and building the checkpoint, the text
encoder, one sampler step with the copy of the weights to VRAM and CUDA's first-use set-up, the
VAE) at a cost of a 64x64 image, one step.

The image goes to PreviewImage, not SaveImage: PreviewImage writes into the worker's temp
folder (the gateway gives each worker its own; ComfyUI empties it at every start, and writes it
with the fastest PNG compression), so a warm-up never appears among a user's outputs. A
SaveImage with a "warmup/" prefix would still land in the output folder and pile up there.

The speed probe (`probe_prompt`) follows the warm-up on the same checkpoint: the same graph at
the family's native size and `PROBE_STEPS` steps. Its loader is cached by then (the same
checkpoint), so its other nodes time a warm job, which is what seeds the worker's speed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from workers.comfy.workflow import work_units

WARMUP_SIZE_PX = 64
WARMUP_STEPS = 1
SEED_LIMIT = 1 << 63
"""Seeds are drawn below this (KSampler accepts up to 2**64 - 1)."""
PROBE_STEPS = 10
"""Sampler steps of the speed probe: enough for the steps to outweigh the job's fixed part."""
NATIVE_SIZE_PX: Mapping[str, int] = MappingProxyType(
    {"sd15": 512, "sdxl": 1024, "sd3": 1024, "flux": 1024}
)
"""The image side each family was trained at, so the probe runs the size its jobs ask for."""
DEFAULT_SIZE_PX = 512
"""The probe's side for a family not in `NATIVE_SIZE_PX`."""

DEFAULT_CFG = 7.0
CFG_BY_FAMILY: Mapping[str, float] = MappingProxyType({"flux": 1.0})
"""Families whose jobs run at CFG 1 (guidance-distilled): ComfyUI then skips the negative pass,
so the warm-up does too."""

_SEEDS = random.SystemRandom()


class Phase(StrEnum):
    """The parts of a txt2img job, as the client sees them from `executing` transitions."""

    LOAD = "load"
    ENCODE = "encode"
    SAMPLE = "sample"
    DECODE = "decode"
    OTHER = "other"


LOADER, POSITIVE, NEGATIVE, LATENT, SAMPLER, DECODER, PREVIEW = "1", "2", "3", "4", "5", "6", "7"
NODE_PHASES: Mapping[str, Phase] = MappingProxyType(
    {
        LOADER: Phase.LOAD,
        POSITIVE: Phase.ENCODE,
        NEGATIVE: Phase.ENCODE,
        LATENT: Phase.OTHER,
        SAMPLER: Phase.SAMPLE,
        DECODER: Phase.DECODE,
        PREVIEW: Phase.OTHER,
    }
)
"""The phase of each node of the warm-up prompt, by node id."""


def warmup_prompt(
    checkpoint: str, family: str | None = None, *, seed: int | None = None
) -> dict[str, Any]:
    """A ComfyUI API-format prompt that loads `checkpoint` and makes one 64x64 image in one step.

    Each call draws a fresh seed (unless `seed` is given), so ComfyUI's cache cannot skip the
    sampler even when the same checkpoint was warmed up before. `family` (e.g. "sdxl", "flux")
    only picks the CFG scale its jobs use; EmptyLatentImage suits every family, since ComfyUI
    widens an empty latent to the model's channels. Node ids are those of `NODE_PHASES`.
    """
    return _txt2img(checkpoint, family, "warm-up", WARMUP_SIZE_PX, WARMUP_STEPS, seed)


def probe_prompt(
    checkpoint: str,
    family: str | None = None,
    *,
    steps: int = PROBE_STEPS,
    seed: int | None = None,
    small: bool = False,
) -> dict[str, Any]:
    """The speed probe: the warm-up's graph (same node ids) at the family's native size
    (`native_size_px`), or at half its side with `small`, `steps` steps, batch 1, a fresh seed
    unless `seed` is given.

    Its positive text differs from the warm-up's, its negative one does not: after the warm-up
    only the loader and the negative encoder are cached, as for a typical warm job. Raises
    ValueError for fewer than one step or a seed out of range.
    """
    if steps < 1:
        raise ValueError(f"the speed probe needs at least one step, got {steps}")
    side = native_size_px(family) // (2 if small else 1)
    return _txt2img(checkpoint, family, "speed probe", side, steps, seed)


def native_size_px(family: str | None) -> int:
    """The probe's image side for `family` (`DEFAULT_SIZE_PX` when unknown)."""
    return NATIVE_SIZE_PX.get(family or "", DEFAULT_SIZE_PX)


def probe_work_units(family: str | None, steps: int = PROBE_STEPS, *, small: bool = False) -> float:
    """The probe's work units, counted as the gateway counts a job's
    (`workers.comfy.workflow.work_units`), so its seconds seed the same speed model."""
    return work_units(probe_prompt("probe.safetensors", family, steps=steps, seed=0, small=small))


def probe_seconds(node_s: Mapping[str, float]) -> float:
    """Seconds of the probe's nodes but its loader: the warm run, as `gateway.learning.learn`
    counts a job's (its loader output is cached: the warm-up loaded the same checkpoint)."""
    return sum(seconds for node_id, seconds in node_s.items() if node_id != LOADER)


def _txt2img(
    checkpoint: str, family: str | None, text: str, size_px: int, steps: int, seed: int | None
) -> dict[str, Any]:
    chosen_seed = _SEEDS.randrange(SEED_LIMIT) if seed is None else seed
    if not 0 <= chosen_seed < SEED_LIMIT:
        raise ValueError(f"seed must be in [0, 2**63), got {chosen_seed}")
    cfg = CFG_BY_FAMILY.get(family or "", DEFAULT_CFG)
    return {
        LOADER: _node("CheckpointLoaderSimple", ckpt_name=checkpoint),
        POSITIVE: _node("CLIPTextEncode", text=text, clip=[LOADER, 1]),
        NEGATIVE: _node("CLIPTextEncode", text="", clip=[LOADER, 1]),
        LATENT: _node("EmptyLatentImage", width=size_px, height=size_px, batch_size=1),
        SAMPLER: _node(
            "KSampler",
            model=[LOADER, 0],
            seed=chosen_seed,
            steps=steps,
            cfg=cfg,
            sampler_name="euler",
            scheduler="normal",
            positive=[POSITIVE, 0],
            negative=[NEGATIVE, 0],
            latent_image=[LATENT, 0],
            denoise=1.0,
        ),
        DECODER: _node("VAEDecode", samples=[SAMPLER, 0], vae=[LOADER, 2]),
        PREVIEW: _node("PreviewImage", images=[DECODER, 0]),
    }


def _node(class_type: str, **inputs: Any) -> dict[str, Any]:
    return {"class_type": class_type, "inputs": inputs}


def phase_seconds(node_s: Mapping[str, float]) -> dict[Phase, float]:
    """Sum the seconds of the warm-up's nodes (by node id, e.g. timed between `executing`
    messages) into phases; an id the warm-up prompt does not have counts as OTHER. Only
    phases that occur are present."""
    phases: dict[Phase, float] = {}
    for node_id, seconds in node_s.items():
        phase = NODE_PHASES.get(node_id, Phase.OTHER)
        phases[phase] = phases.get(phase, 0.0) + seconds
    return phases


@dataclass(frozen=True)
class WarmupResult:
    """How a warm-up of `checkpoint` went: `seconds` end to end, `phase_s` per phase if known,
    and the speed probe's work units and seconds if it ran (`probe_units`, `probe_s`).

    What it can seed: `load_s` (the loader node: reading and building the checkpoint) is a
    measured load time for this checkpoint on this worker; `seconds` is what a cold start of
    it costs. The warm-up's sample phase is not a speed measurement: in ComfyUI it also holds
    the copy of the weights to VRAM and the first use of CUDA, which dwarf one 64x64 step. The
    probe is one: a warm job of `probe_units` work units that ran in `probe_s` (its non-loader
    nodes), which seeds the family's speed. Raises ValueError for negative values, or a probe
    with only one of its two numbers.
    """

    checkpoint: str
    seconds: float
    family: str | None = None
    phase_s: Mapping[Phase, float] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    probe_units: float | None = None
    probe_s: float | None = None
    small_units: float | None = None
    small_s: float | None = None
    """The same probe at half the side (`probe_prompt(small=True)`), when it ran: a second
    size tells the seconds a job pays per step whatever its size (a fast card's small images
    are bound by them: an H200 ran SD1.5 at 512x512 at half the speed per work unit its larger
    jobs showed) from those per work unit."""

    def __post_init__(self) -> None:
        if self.seconds < 0 or any(value < 0 for value in self.phase_s.values()):
            raise ValueError(f"negative warm-up time for {self.checkpoint!r}")
        for units, seconds in ((self.probe_units, self.probe_s), (self.small_units, self.small_s)):
            if (units is None) != (seconds is None):
                raise ValueError(
                    f"a speed probe of {self.checkpoint!r} needs both units and seconds"
                )
            if (units or 0.0) < 0 or (seconds or 0.0) < 0:
                raise ValueError(f"negative speed probe for {self.checkpoint!r}")
        if self.small_units is not None and self.probe_units is None:
            raise ValueError(f"a small probe of {self.checkpoint!r} without the probe")
        # A private read-only copy: the caller's dict may change later, this record may not.
        object.__setattr__(self, "phase_s", MappingProxyType(dict(self.phase_s)))

    @property
    def load_s(self) -> float | None:
        """Seconds of the loader node, if the phases are known."""
        return self.phase_s.get(Phase.LOAD)

    @property
    def probe(self) -> tuple[float, float] | None:
        """(work units, seconds) of the speed probe, if it ran."""
        if self.probe_units is None or self.probe_s is None:
            return None
        return self.probe_units, self.probe_s

    @property
    def probes(self) -> tuple[tuple[float, float], ...]:
        """(work units, seconds) of each probe that ran, the native size first."""
        points = [self.probe]
        if self.small_units is not None and self.small_s is not None:
            points.append((self.small_units, self.small_s))
        return tuple(point for point in points if point is not None)
