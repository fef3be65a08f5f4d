"""Everything one emulated instance is started with, read once by the CLI and passed down."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from workers.comfy.flags import LaunchFlags
from workers.emulator.card.profiles import Profile

DEFAULT_PORT = 8188
DEFAULT_CHECKPOINTS = (
    "v1-5-pruned-emaonly.safetensors",
    "dreamshaper_8.safetensors",
    "sd_xl_base_1.0.safetensors",
    "juggernautXL_v9.safetensors",
)
DEFAULT_MODELS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # The files of the web frontend's default graph (Z-Image Turbo in frontend 1.58),
        # so that a first Run in the editor finds them.
        "diffusion_models": ("z_image_turbo_bf16.safetensors",),
        "text_encoders": ("qwen_3_4b.safetensors",),
        "vae": ("ae.safetensors",),
    }
)
"""Files of the model folders other than checkpoints, by folder (`modelfolders.MODEL_FOLDERS`)."""
MIB = 1024 * 1024


@dataclass(frozen=True)
class EmulatorConfig:
    """One instance: where it listens, what card and flags it emulates, its directories."""

    profile: Profile
    input_dir: Path
    output_dir: Path
    temp_dir: Path
    base_dir: Path | None = None
    flags: LaunchFlags = field(default_factory=LaunchFlags)
    port: int = DEFAULT_PORT
    listen: tuple[str, ...] = ("127.0.0.1",)
    time_scale: float = 1.0
    startup_s: float | None = None
    checkpoints: tuple[str, ...] = DEFAULT_CHECKPOINTS
    models: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_MODELS))
    """The other model folders' files (a folder not named: none)."""
    max_upload_mb: float = 100
    cors_origin: str | None = None
    disable_metadata: bool = False
    disable_smart_memory: bool = False
    preview_size: int = 512
    argv: tuple[str, ...] = ("main.py",)
    faults: Mapping[str, Any] = field(default_factory=dict)
    page_cache_dir: Path | None = None
    """The host's page cache, shared with the other emulators of the host (`pagecache`)."""

    @property
    def model_files(self) -> dict[str, tuple[str, ...]]:
        """Every model folder's files, checkpoints included."""
        return {**self.models, "checkpoints": self.checkpoints}

    @property
    def max_upload_bytes(self) -> int:
        """aiohttp's client_max_size: the cap on every request body."""
        return round(self.max_upload_mb * MIB)

    @property
    def base_path(self) -> str:
        """ComfyUI's base path (model folders lie under it): `--base-directory`, else the
        folder holding the output directory, which is where ComfyUI keeps it by default."""
        return os.path.abspath(self.base_dir or self.output_dir.parent)

    @property
    def server_features(self) -> dict[str, Any]:
        """`GET /features` and the feature_flags reply (max_upload_size unrounded, as ComfyUI)."""
        return {"supports_preview_metadata": True, "max_upload_size": self.max_upload_mb * MIB}

    @property
    def startup_delay_s(self) -> float:
        """Seconds before the socket is bound: the profile's start-up time, scaled."""
        if self.startup_s is not None:
            return self.startup_s
        return self.profile.startup_s * self.time_scale
