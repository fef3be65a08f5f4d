"""What a prompt needs: model files, the primary checkpoint, sampling work, able workers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.workers.comfy.prompts import default_graph
from workers.comfy.catalog import Catalog
from workers.comfy.workflow import (
    capable_sources,
    checkpoint,
    model_keys,
    sampler_nodes,
    work_units,
)

Prompt = dict[str, Any]


def controlnet_lora_graph() -> Prompt:
    """Checkpoint + LoRA + separate VAE + ControlNet + upscale, with distractor strings."""
    prompt = default_graph()
    prompt.update(
        {
            "10": {
                "class_type": "LoraLoader",
                "inputs": {
                    "model": ["4", 0],
                    "clip": ["4", 1],
                    "lora_name": "styles/ink.safetensors",
                    "strength_model": 1.0,
                    "strength_clip": 1.0,
                },
            },
            "11": {"class_type": "VAELoader", "inputs": {"vae_name": "vae-ft-mse.SAFETENSORS"}},
            "12": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "canny.pth"}},
            "13": {"class_type": "LoadImage", "inputs": {"image": "edges.png"}},
            "14": {
                "class_type": "ControlNetApplyAdvanced",
                "inputs": {
                    "positive": ["6", 0],
                    "negative": ["7", 0],
                    "control_net": ["12", 0],
                    "image": ["13", 0],
                    "strength": 1.0,
                    "start_percent": 0.0,
                    "end_percent": 1.0,
                },
            },
            "15": {"class_type": "UpscaleModelLoader", "inputs": {"model_name": "4x.pth"}},
            "16": {"class_type": "VAELoader", "inputs": {"vae_name": "pixel_space"}},
            "17": {
                "class_type": "SaveImage",
                "inputs": {"images": ["8", 0], "filename_prefix": "out.safetensors"},
            },
        }
    )
    prompt["3"]["inputs"].update({"model": ["10", 0], "positive": ["14", 0]})
    prompt["8"]["inputs"]["vae"] = ["11", 0]
    return prompt


def test_model_keys_of_a_checkpoint_lora_vae_controlnet_workflow(catalog: Catalog) -> None:
    assert model_keys(controlnet_lora_graph(), catalog) == {
        "A.safetensors",
        "styles/ink.safetensors",
        "vae-ft-mse.SAFETENSORS",
        "canny.pth",
        "4x.pth",
    }


def test_model_keys_of_a_unet_workflow(catalog: Catalog) -> None:
    prompt = {
        "1": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": "flux1-dev.sft", "weight_dtype": "default"},
        },
        "2": {
            "class_type": "DualCLIPLoader",
            "inputs": {"clip_name1": "t5xxl.gguf", "clip_name2": "clip_l.bin", "type": "flux"},
        },
        "3": {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "vit.pt"}},
        "4": {"class_type": "MyCustomLoader", "inputs": {"model_name": "custom.ckpt"}},
        "5": {"class_type": "MyCustomLoader", "inputs": {"title": "note.ckpt"}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "x.safetensors"}},
    }
    assert model_keys(prompt, catalog) == {
        "flux1-dev.sft",
        "t5xxl.gguf",
        "clip_l.bin",
        "vit.pt",
        "custom.ckpt",
    }


def test_model_keys_of_nothing(catalog: Catalog) -> None:
    assert model_keys({}, catalog) == frozenset()
    malformed: Any = {"1": "junk", "2": {"inputs": None}}
    assert model_keys(malformed, catalog) == frozenset()


# --- primary checkpoint -----------------------------------------------------------------


def test_checkpoint_of_the_default_graph() -> None:
    assert checkpoint(default_graph(ckpt="B.safetensors")) == "B.safetensors"


def test_checkpoint_follows_the_first_samplers_model() -> None:
    prompt = controlnet_lora_graph()
    prompt["2"] = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "other.ckpt"}}
    prompt["10"]["inputs"]["model"] = ["20", 0]
    prompt["20"] = {
        "class_type": "UNETLoader",
        "inputs": {"unet_name": "unet.safetensors", "weight_dtype": "default"},
    }
    assert checkpoint(prompt) == "unet.safetensors"


def test_checkpoint_without_sampler_takes_the_first_loader() -> None:
    prompt = {
        "12": {"class_type": "UNETLoader", "inputs": {"unet_name": "u.safetensors"}},
        "10": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "c10.ckpt"}},
        "9": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "c9.ckpt"}},
    }
    assert checkpoint(prompt) == "c9.ckpt"
    assert checkpoint({"1": {"class_type": "SaveImage", "inputs": {}}}) is None


# --- samplers and work ------------------------------------------------------------------


def advanced_graph() -> Prompt:
    prompt = default_graph()
    prompt["3"] = {
        "class_type": "KSamplerAdvanced",
        "inputs": {
            **{k: v for k, v in prompt["3"]["inputs"].items() if k not in ("seed", "denoise")},
            "steps": 30,
            "start_at_step": 5,
            "end_at_step": 25,
        },
    }
    return prompt


def custom_graph() -> Prompt:
    prompt = default_graph()
    prompt["3"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["20", 0],
            "guider": ["21", 0],
            "sampler": ["22", 0],
            "sigmas": ["24", 0],
            "latent_image": ["5", 0],
        },
    }
    prompt["23"] = {
        "class_type": "BasicScheduler",
        "inputs": {"model": ["4", 0], "scheduler": "simple", "steps": 12, "denoise": 1.0},
    }
    prompt["24"] = {
        "class_type": "SplitSigmas",
        "inputs": {"sigmas": ["23", 0], "step": 0},
    }
    return prompt


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (default_graph(steps=25), [("3", 25)]),
        (advanced_graph(), [("3", 20)]),
        (custom_graph(), [("3", 12)]),
        (
            {
                "1": {
                    "class_type": "KSampler",
                    "inputs": {"latent_image": ["2", 0], "steps": ["9", 0]},
                }
            },
            [("1", 20)],
        ),
        ({"1": {"class_type": "SaveImage", "inputs": {}}}, []),
    ],
    ids=["ksampler", "advanced", "custom-advanced", "linked-steps", "none"],
)
def test_sampler_nodes_and_their_steps(prompt: Prompt, expected: list[tuple[str, int]]) -> None:
    assert sampler_nodes(prompt) == expected


def hires_graph() -> Prompt:
    prompt = default_graph(steps=20)
    prompt["5"]["inputs"].update({"width": 1000, "height": 500, "batch_size": 2})
    prompt["10"] = {
        "class_type": "LatentUpscaleBy",
        "inputs": {"samples": ["3", 0], "upscale_method": "nearest-exact", "scale_by": 2.0},
    }
    prompt["11"] = {
        "class_type": "KSampler",
        "inputs": {**prompt["3"]["inputs"], "steps": 10, "latent_image": ["10", 0]},
    }
    return prompt


def img2img_graph() -> Prompt:
    prompt = default_graph(steps=10)
    prompt["5"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["12", 0], "vae": ["4", 2]}}
    prompt["12"] = {"class_type": "LoadImage", "inputs": {"image": "x.png"}}
    return prompt


def video_graph() -> Prompt:
    prompt = default_graph(steps=4)
    prompt["5"] = {
        "class_type": "EmptyHunyuanLatentVideo",
        "inputs": {"width": 100, "height": 100, "length": 25, "batch_size": 1},
    }
    return prompt


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (default_graph(steps=20), 20 * 0.262144),
        (hires_graph(), 20 * 1.0 + 10 * 4.0),
        (img2img_graph(), 10 * 0.262144),
        (video_graph(), 4 * 0.01 * 25),
        ({}, 0.0),
    ],
    ids=["txt2img", "hires-fix", "img2img-default-size", "video-frames", "empty"],
)
def test_work_units_are_steps_times_megapixels_times_batch(prompt: Prompt, expected: float) -> None:
    assert work_units(prompt) == pytest.approx(expected)


# --- able sources -----------------------------------------------------------------------


@pytest.fixture
def farm(catalog: Catalog) -> Catalog:
    def worker(ckpts: list[str], images: list[str]) -> Catalog:
        return catalog.with_combo_options(
            {("CheckpointLoaderSimple", "ckpt_name"): ckpts, ("LoadImage", "image"): images}
        )

    return Catalog.merge(
        {
            "gpu0": worker(["A.safetensors", "B.safetensors"], ["x.png"]),
            "gpu1": worker(["B.safetensors"], []),
        }
    )


def test_capable_sources_need_every_combo_value(farm: Catalog) -> None:
    assert capable_sources(default_graph(ckpt="A.safetensors"), farm) == {"gpu0"}
    assert capable_sources(default_graph(ckpt="B.safetensors"), farm) == {"gpu0", "gpu1"}
    assert capable_sources(default_graph(ckpt="Z.safetensors"), farm) == frozenset()


def test_capable_sources_consider_only_what_the_outputs_need(farm: Catalog) -> None:
    prompt = default_graph(ckpt="B.safetensors")
    prompt["20"] = {
        "class_type": "CheckpointLoaderSimple",
        "inputs": {"ckpt_name": "A.safetensors"},
    }
    assert capable_sources(prompt, farm) == {"gpu0"}
    assert capable_sources(prompt, farm, ["9"]) == {"gpu0", "gpu1"}


def test_capable_sources_can_ignore_uploaded_inputs(farm: Catalog) -> None:
    prompt = img2img_graph()
    prompt["4"]["inputs"]["ckpt_name"] = "B.safetensors"
    assert capable_sources(prompt, farm) == {"gpu0"}
    ignored = {("LoadImage", "image")}
    assert capable_sources(prompt, farm, ignore_inputs=ignored) == {"gpu0", "gpu1"}
