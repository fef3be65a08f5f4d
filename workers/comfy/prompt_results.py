"""What one prompt leaves in ComfyUI's node-output cache: how many results, keyed by what.

ComfyUI knowledge, read by the emulator's residency (what an instance keeps) and by the launch
planning (how many checkpoints `--cache-lru N` keeps, `workers.comfy.launch_args`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptResults:
    """The node results one prompt leaves in ComfyUI's cache, by what their keys depend on."""

    per_model: int = 3
    """Keyed by the checkpoint: its loader and the two text encoders fed by its CLIP."""
    per_family: int = 1
    """Keyed by the family's image size only: the empty latent, shared by its checkpoints."""
    fresh: int = 3
    """New with every seed: the sampler, the decoder and the save node."""


TXT2IMG = PromptResults()
"""CheckpointLoaderSimple, two CLIPTextEncode, EmptyLatentImage, KSampler, VAEDecode,
SaveImage, the texts unchanged and a fresh seed per job."""
