"""Which core combo inputs list which ComfyUI folder, and how each listing is shaped.

ComfyUI 0.3.64 builds these combos from `folder_paths.get_filename_list(folder)` (sorted) or,
for the loaders of the input directory, from the directory's top-level files filtered by MIME
type. A catalogue recorded on one instance carries that instance's files; these tables let
another instance (the emulator) put its own lists in their place.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from typing import Any

from workers.comfy.catalog import Catalog

InputRef = tuple[str, str]

MODEL_FOLDER_INPUTS: Mapping[str, tuple[InputRef, ...]] = {
    "checkpoints": (
        ("CheckpointLoaderSimple", "ckpt_name"),
        ("CheckpointLoader", "ckpt_name"),
        ("unCLIPCheckpointLoader", "ckpt_name"),
        ("ImageOnlyCheckpointLoader", "ckpt_name"),
        ("CreateHookModelAsLora", "ckpt_name"),
        ("CreateHookModelAsLoraModelOnly", "ckpt_name"),
    ),
    "configs": (("CheckpointLoader", "config_name"),),
    "loras": (
        ("LoraLoader", "lora_name"),
        ("LoraLoaderModelOnly", "lora_name"),
        ("CreateHookLora", "lora_name"),
        ("CreateHookLoraModelOnly", "lora_name"),
    ),
    "controlnet": (
        ("ControlNetLoader", "control_net_name"),
        ("DiffControlNetLoader", "control_net_name"),
    ),
    "diffusion_models": (("UNETLoader", "unet_name"),),
    "text_encoders": (
        ("CLIPLoader", "clip_name"),
        ("DualCLIPLoader", "clip_name1"),
        ("DualCLIPLoader", "clip_name2"),
        ("TripleCLIPLoader", "clip_name1"),
        ("TripleCLIPLoader", "clip_name2"),
        ("TripleCLIPLoader", "clip_name3"),
        ("QuadrupleCLIPLoader", "clip_name1"),
        ("QuadrupleCLIPLoader", "clip_name2"),
        ("QuadrupleCLIPLoader", "clip_name3"),
        ("QuadrupleCLIPLoader", "clip_name4"),
    ),
    "clip_vision": (("CLIPVisionLoader", "clip_name"),),
    "style_models": (("StyleModelLoader", "style_model_name"),),
    "gligen": (("GLIGENLoader", "gligen_name"),),
    "hypernetworks": (("HypernetworkLoader", "hypernetwork_name"),),
    "upscale_models": (("UpscaleModelLoader", "model_name"),),
    "photomaker": (("PhotoMakerLoader", "photomaker_model_name"),),
    "model_patches": (("ModelPatchLoader", "name"),),
    "audio_encoders": (("AudioEncoderLoader", "audio_encoder_name"),),
}

# Input-directory loaders: which MIME content types each keeps (None: every file), and
# which extension a file needs instead (LoadLatent lists only ".latent" files).
INPUT_DIR_INPUTS: Mapping[InputRef, tuple[str, ...] | None] = {
    ("LoadImage", "image"): ("image",),
    ("LoadImageMask", "image"): None,
    ("LoadAudio", "audio"): ("audio", "video"),
    ("LoadVideo", "file"): ("video",),
}
LATENT_INPUT: InputRef = ("LoadLatent", "latent")

# VAELoader offers a TAESD name when both halves sit in `vae_approx`.
_TAESD_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("taesd", "taesd_decoder.", "taesd_encoder."),
    ("taesdxl", "taesdxl_decoder.", "taesdxl_encoder."),
    ("taesd3", "taesd3_decoder.", "taesd3_encoder."),
    ("taef1", "taef1_decoder.", "taef1_encoder."),
)


def with_file_lists(catalog: Catalog, folders: Mapping[str, Sequence[str]]) -> Catalog:
    """A copy of `catalog` where core file combos list an instance's own files.

    `folders` maps a ComfyUI folder name ("checkpoints", "loras", "vae", "controlnet",
    "upscale_models", "diffusion_models", "text_encoders", "clip_vision", "input", ...) to
    the names that folder holds; `combo_replacements` says which inputs each feeds and how a
    listing is filtered (e.g. LoadImage lists only image files).
    """
    return catalog.with_combo_options(combo_replacements(catalog, folders))


def combo_replacements(
    catalog: Catalog, folders: Mapping[str, Sequence[str]]
) -> dict[InputRef, list[Any]]:
    """The `(class_type, input) -> options` that `folders` implies for `catalog`.

    Keys of `folders` are folder names: the model folders above, "vae" (with "vae_approx"),
    and "input" for the input directory. Inputs of classes the catalogue lacks are skipped.
    """
    result: dict[InputRef, list[Any]] = {}
    for folder, names in folders.items():
        for ref in MODEL_FOLDER_INPUTS.get(folder, ()):
            result[ref] = sorted(set(names))
    if "vae" in folders or "vae_approx" in folders:
        result[("VAELoader", "vae_name")] = vae_options(
            folders.get("vae", ()), folders.get("vae_approx", ())
        )
    if "input" in folders:
        result.update(input_dir_options(folders["input"]))
    return {ref: options for ref, options in result.items() if ref[0] in catalog}


def vae_options(vaes: Sequence[str], approx: Sequence[str]) -> list[str]:
    """VAELoader's list: the VAE files, TAESD names whose halves exist, then "pixel_space"."""
    options = sorted(set(vaes))
    for name, decoder, encoder in _TAESD_PAIRS:
        has_decoder = any(file.startswith(decoder) for file in approx)
        has_encoder = any(file.startswith(encoder) for file in approx)
        if has_decoder and has_encoder:
            options.append(name)
    options.append("pixel_space")
    return options


def input_dir_options(files: Sequence[str]) -> dict[InputRef, list[Any]]:
    """Each input-directory loader's list for the top-level files `files`."""
    result: dict[InputRef, list[Any]] = {}
    for ref, kinds in INPUT_DIR_INPUTS.items():
        kept = files if kinds is None else [f for f in files if content_type(f) in kinds]
        result[ref] = sorted(kept)
    result[LATENT_INPUT] = sorted(f for f in files if f.endswith(".latent"))
    return result


def content_type(filename: str) -> str | None:
    """The MIME content type ("image", "video", ...) guessed from the name, as ComfyUI does."""
    mime, _ = mimetypes.guess_type(filename, strict=False)
    return mime.split("/")[0] if mime else None
