"""The model family a checkpoint's file name suggests: one guess, shared by gateway and workers.

The gateway keys its speed and load estimates by family (`gateway.learning.learn`); the warm-up
picks
its CFG scale and the speed probe its native image size by it (`workers.warmup.prompts`); the
emulator
charges a profile's family costs by it (`workers.emulator.card.profiles.cost_family`). All must
guess alike, so the guess lives here, below them.
"""

from __future__ import annotations

FAMILY_PATTERNS = (
    ("z_image", "zimage"),
    ("z-image", "zimage"),
    ("zimage", "zimage"),
    ("flux", "flux"),
    ("sd3", "sd3"),
    ("sdxl", "sdxl"),
    ("sd_xl", "sdxl"),
    ("pony", "sdxl"),
    ("illustrious", "sdxl"),
    ("xl", "sdxl"),
)
"""Substrings of a checkpoint (or diffusion model) file name, lowercase, first match wins;
else "sd15". The emulator charges a profile's family costs by this guess too
(`workers.emulator.card.profiles.cost_family`)."""


def family_of(checkpoint: str | None) -> str:
    """The model family a checkpoint's file name suggests ("unknown" without a checkpoint)."""
    if not checkpoint:
        return "unknown"
    lowered = checkpoint.lower()
    return next((family for pattern, family in FAMILY_PATTERNS if pattern in lowered), "sd15")


TYPICAL_GB = {
    "sd15": 2.1,  # v1-5-pruned-emaonly-fp16: 2.13 GB
    "sdxl": 6.9,  # sd_xl_base_1.0: 6.94 GB
    "sd3": 6.0,  # sd3_medium_incl_clips: 5.97 GB
    "flux": 17.2,  # flux1-dev-fp8, all in one: 17.2 GB
    "zimage": 20.6,  # z_image_turbo bf16 12.3 GB, its text encoder 8.0 GB, VAE 0.3 GB
}
"""Gigabytes a family's common release loads (its checkpoint and the files that come with it):
load seconds grow with them, so a worker that measured only one family's loads has the others'
estimated from it in proportion (`gateway.scheduler.cost.key_load_s`); only the ratios count."""
