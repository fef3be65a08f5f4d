"""Prompts (API-format graphs) the contract checks submit.

The txt2img graph is the one of the recorded transcript, with the same node ids and the same
key order, so that an uncached run can be compared event by event with `ws_transcript.json`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

TRANSCRIPT_PATH = Path(__file__).with_name("ws_transcript.json")

Prompt = dict[str, dict[str, Any]]

LOADER, POSITIVE, NEGATIVE, LATENT, SAMPLER, DECODE, SAVE = "4", "6", "7", "5", "3", "8", "9"
ALL_NODES = [LOADER, POSITIVE, NEGATIVE, LATENT, SAMPLER, DECODE, SAVE]


def load_transcript() -> dict[str, Any]:
    """The recorded view of one prompt on a real ComfyUI 0.3.64 (see recorded/README.md)."""
    transcript: dict[str, Any] = json.loads(TRANSCRIPT_PATH.read_text())
    return transcript


def recorded_prompt() -> Prompt:
    """The prompt of the transcript, exactly as the real server echoed it in `/queue`."""
    running = load_transcript()["responses"]["queue_during"]["queue_running"][0]
    prompt: Prompt = running[2]
    return prompt


def txt2img(
    ckpt_name: str,
    prefix: str,
    *,
    seed: int = 12345,
    steps: int = 1,
    size: int = 64,
) -> Prompt:
    """The transcript's graph (loader, two text encodings, empty latent, sampler, decode,
    save) on `ckpt_name`, saving as `prefix`."""
    prompt = copy.deepcopy(recorded_prompt())
    prompt[LOADER]["inputs"]["ckpt_name"] = ckpt_name
    prompt[LATENT]["inputs"].update(width=size, height=size)
    prompt[SAMPLER]["inputs"].update(seed=seed, steps=steps)
    prompt[SAVE]["inputs"]["filename_prefix"] = prefix
    return prompt


def load_and_save(image_name: str, prefix: str) -> Prompt:
    """LoadImage of an input file straight into SaveImage: no model involved."""
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": image_name}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": prefix}},
    }


def with_second_output(prompt: Prompt, *, width: int, prefix: str) -> Prompt:
    """`prompt` plus a second branch (empty latent "12" -> decode "11" -> save "10") that
    shares the loader's VAE; a bad `width` makes only that branch invalid."""
    extended = copy.deepcopy(prompt)
    extended["12"] = {
        "class_type": "EmptyLatentImage",
        "inputs": {"width": width, "height": 64, "batch_size": 1},
    }
    extended["11"] = {
        "class_type": "VAEDecode",
        "inputs": {"samples": ["12", 0], "vae": [LOADER, 2]},
    }
    extended["10"] = {
        "class_type": "SaveImage",
        "inputs": {"images": ["11", 0], "filename_prefix": prefix},
    }
    return extended
