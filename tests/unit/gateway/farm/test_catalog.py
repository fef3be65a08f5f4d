"""The farm's catalogue and a Z-Image prompt (the web frontend's default graph): validated,
placed on the workers that list its files, keyed by every file it loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.farm.catalog import FarmCatalog
from gateway.jobs.models import Placement
from tests.unit.workers.comfy.prompts import (
    Z_IMAGE_TEXT_ENCODER,
    Z_IMAGE_UNET,
    Z_IMAGE_VAE,
    z_image_turbo_graph,
)
from workers.emulator.catalog import NodeCatalog
from workers.emulator.config import DEFAULT_CHECKPOINTS, DEFAULT_MODELS
from workers.emulator.files import Dirs


def object_info(tmp_path: Path, models: dict[str, Any]) -> dict[str, Any]:
    dirs = Dirs.create(tmp_path / "in", tmp_path / "out", tmp_path / "temp")
    info: dict[str, Any] = json.loads(NodeCatalog.load(models, dirs).object_info_json())
    return info


@pytest.fixture
def farm(tmp_path: Path) -> FarmCatalog:
    catalog = FarmCatalog(None)
    z_image = {"checkpoints": DEFAULT_CHECKPOINTS, **DEFAULT_MODELS}
    checkpoints_only = {"checkpoints": DEFAULT_CHECKPOINTS}
    catalog.update(
        {
            "both": object_info(tmp_path / "a", z_image),
            "sd": object_info(tmp_path / "b", checkpoints_only),
        }
    )
    return catalog


def test_a_z_image_prompt_is_valid_and_only_for_workers_with_its_files(farm: FarmCatalog) -> None:
    prompt = z_image_turbo_graph()
    validation = farm.validate(prompt, None)
    assert validation.ok, validation.node_errors
    assert validation.outputs == ["9"]
    assert farm.capable(validation.prompt, validation.outputs) == {"both"}


def test_its_model_keys_are_the_diffusion_model_text_encoder_and_vae(farm: FarmCatalog) -> None:
    primary, keys, units = farm.placement_facts(z_image_turbo_graph(steps=8))
    assert primary == Z_IMAGE_UNET
    assert keys == tuple(sorted((Z_IMAGE_UNET, Z_IMAGE_TEXT_ENCODER, Z_IMAGE_VAE)))
    assert units == pytest.approx(8 * 1024 * 1024 / 1e6)
    view = Placement(checkpoint=primary, model_keys=keys).job_view("j", enqueued_at_ms=0)
    assert view.family == "zimage"


def test_lora_and_dual_clip_files_are_model_keys_too(farm: FarmCatalog) -> None:
    prompt = z_image_turbo_graph()
    prompt["72"] = {
        "class_type": "LoraLoaderModelOnly",
        "inputs": {"model": ["66", 0], "lora_name": "style.safetensors", "strength_model": 1},
    }
    prompt["62"] = {
        "class_type": "DualCLIPLoader",
        "inputs": {"clip_name1": "clip_l.safetensors", "clip_name2": "t5.gguf", "type": "flux"},
    }
    prompt["69"]["inputs"]["model"] = ["72", 0]
    _, keys, _ = farm.placement_facts(prompt)
    assert set(keys) == {
        Z_IMAGE_UNET,
        Z_IMAGE_VAE,
        "style.safetensors",
        "clip_l.safetensors",
        "t5.gguf",
    }


def test_a_file_no_worker_lists_is_refused_as_comfyui_does(farm: FarmCatalog) -> None:
    prompt = z_image_turbo_graph()
    prompt["63"]["inputs"]["vae_name"] = "flux_vae.safetensors"
    validation = farm.validate(prompt, None)
    assert not validation.ok
    errors = validation.node_errors["63"]["errors"]
    assert [e["type"] for e in errors] == ["value_not_in_list"]
