"""The warm-up prompt: a tiny txt2img run that loads a checkpoint before clients see a worker.

It touches everything a first job pays for (reading and building the checkpoint, the text
encoder, one sampler step with the copy of the weights to VRAM and CUDA's first-use set-up, the
VAE) at a cost of a 64x64 image, one step.

The image goes to PreviewImage, not SaveImage: PreviewImage writes into the worker's temp
folder (the gateway gives each worker its own; ComfyUI empties it at every start, and writes it
with the fastest PNG compression), so a warm-up never appears among a user's outputs. A
SaveImage with a "warmup/" prefix would still land in the output folder and pile up there.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

WARMUP_SIZE_PX = 64
WARMUP_STEPS = 1
SEED_LIMIT = 1 << 63
"""Seeds are drawn below this (KSampler accepts up to 2**64 - 1)."""

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
    chosen_seed = _SEEDS.randrange(SEED_LIMIT) if seed is None else seed
    if not 0 <= chosen_seed < SEED_LIMIT:
        raise ValueError(f"seed must be in [0, 2**63), got {chosen_seed}")
    cfg = CFG_BY_FAMILY.get(family or "", DEFAULT_CFG)
    return {
        LOADER: _node("CheckpointLoaderSimple", ckpt_name=checkpoint),
        POSITIVE: _node("CLIPTextEncode", text="warm-up", clip=[LOADER, 1]),
        NEGATIVE: _node("CLIPTextEncode", text="", clip=[LOADER, 1]),
        LATENT: _node(
            "EmptyLatentImage", width=WARMUP_SIZE_PX, height=WARMUP_SIZE_PX, batch_size=1
        ),
        SAMPLER: _node(
            "KSampler",
            model=[LOADER, 0],
            seed=chosen_seed,
            steps=WARMUP_STEPS,
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
    """How a warm-up of `checkpoint` went: `seconds` end to end, `phase_s` per phase if known.

    What it can seed: `load_s` (the loader node: reading and building the checkpoint) is a
    measured load time for this checkpoint on this worker; `seconds` is what a cold start of
    it costs. The sample phase is not a speed measurement: in ComfyUI it also holds the copy of
    the weights to VRAM and the first use of CUDA, which dwarf one 64x64 step; speeds should
    come from real jobs. Raises ValueError for negative times.
    """

    checkpoint: str
    seconds: float
    family: str | None = None
    phase_s: Mapping[Phase, float] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __post_init__(self) -> None:
        if self.seconds < 0 or any(value < 0 for value in self.phase_s.values()):
            raise ValueError(f"negative warm-up time for {self.checkpoint!r}")
        # A private read-only copy: the caller's dict may change later, this record may not.
        object.__setattr__(self, "phase_s", MappingProxyType(dict(self.phase_s)))

    @property
    def load_s(self) -> float | None:
        """Seconds of the loader node, if the phases are known."""
        return self.phase_s.get(Phase.LOAD)
