"""ComfyUI 0.3.64's model folders (`folder_paths.folder_names_and_paths`) and where they lie.

Each name's folders, relative to the base directory, in ComfyUI's order; `main.py` then adds
`<output>/<folder>` to five of them (models saved by the Save* nodes). The emulator keeps no
model files: these paths are only reported (`/experiment/models`, `/internal/folder_paths`).
"""

from __future__ import annotations

import os
from typing import Any

FOLDERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("checkpoints", ("models/checkpoints",)),
    ("configs", ("models/configs",)),
    ("loras", ("models/loras",)),
    ("vae", ("models/vae",)),
    ("text_encoders", ("models/text_encoders", "models/clip")),
    ("diffusion_models", ("models/unet", "models/diffusion_models")),
    ("clip_vision", ("models/clip_vision",)),
    ("style_models", ("models/style_models",)),
    ("embeddings", ("models/embeddings",)),
    ("diffusers", ("models/diffusers",)),
    ("vae_approx", ("models/vae_approx",)),
    ("controlnet", ("models/controlnet", "models/t2i_adapter")),
    ("gligen", ("models/gligen",)),
    ("upscale_models", ("models/upscale_models",)),
    ("custom_nodes", ("custom_nodes",)),
    ("hypernetworks", ("models/hypernetworks",)),
    ("photomaker", ("models/photomaker",)),
    ("classifiers", ("models/classifiers",)),
    ("model_patches", ("models/model_patches",)),
    ("audio_encoders", ("models/audio_encoders",)),
)
# main.py's add_model_folder_path calls: folder name -> subfolder of the output directory
# ("clip" is the legacy name of text_encoders, and keeps its own subfolder name).
IN_OUTPUT = {
    "checkpoints": "checkpoints",
    "text_encoders": "clip",
    "vae": "vae",
    "diffusion_models": "diffusion_models",
    "loras": "loras",
}
# Left out of the folder listing of `/experiment/models`.
NOT_MODELS = ("configs", "custom_nodes")
# folder_paths.map_legacy: the old names of two folders, still accepted where a folder is named
# (model path configs), though `/models/unet` is a 404 as in ComfyUI.
LEGACY_NAMES = {"unet": "diffusion_models", "clip": "text_encoders"}
# The folders an emulated instance can be given files for (`--models FOLDER=a,b`).
MODEL_FOLDERS = tuple(name for name, _ in FOLDERS if name not in (*NOT_MODELS, "embeddings"))


def model_folder(name: str) -> str:
    """The model folder `name` means, legacy names mapped; ValueError for one ComfyUI lacks."""
    folder = LEGACY_NAMES.get(name, name)
    if folder not in MODEL_FOLDERS:
        known = ", ".join((*MODEL_FOLDERS, *LEGACY_NAMES))
        raise ValueError(f"unknown model folder {name!r}: not one of {known}")
    return folder


def folder_paths(base_dir: str, output_dir: str) -> dict[str, list[str]]:
    """Every folder name with its absolute paths (`/internal/folder_paths`)."""
    paths: dict[str, list[str]] = {}
    for name, relative in FOLDERS:
        paths[name] = [os.path.join(base_dir, *part.split("/")) for part in relative]
        if name in IN_OUTPUT:
            paths[name].append(os.path.join(output_dir, IN_OUTPUT[name]))
    return paths


def model_folders(base_dir: str, output_dir: str) -> list[dict[str, Any]]:
    """`/experiment/models`: `{"name", "folders"}` for each folder that holds models."""
    return [
        {"name": name, "folders": folders}
        for name, folders in folder_paths(base_dir, output_dir).items()
        if name not in NOT_MODELS
    ]
