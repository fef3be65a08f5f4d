"""Prompts the prompt-logic tests build on."""

from __future__ import annotations

from typing import Any


def default_graph(
    *, steps: int = 20, seed: int = 8566257, ckpt: str = "A.safetensors"
) -> dict[str, Any]:
    """ComfyUI's own API example graph, inputs in alphabetical order as its script sends them."""
    return {
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "cfg": 8,
                "denoise": 1,
                "latent_image": ["5", 0],
                "model": ["4", 0],
                "negative": ["7", 0],
                "positive": ["6", 0],
                "sampler_name": "euler",
                "scheduler": "normal",
                "seed": seed,
                "steps": steps,
            },
        },
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt}},
        "5": {
            "class_type": "EmptyLatentImage",
            "inputs": {"batch_size": 1, "height": 512, "width": 512},
        },
        "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a cat"}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "bad"}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {
            "class_type": "SaveImage",
            "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]},
        },
    }


Z_IMAGE_UNET = "z_image_turbo_bf16.safetensors"
Z_IMAGE_TEXT_ENCODER = "qwen_3_4b.safetensors"
Z_IMAGE_VAE = "ae.safetensors"


def z_image_turbo_graph(*, steps: int = 8, seed: int = 42, size_px: int = 1024) -> dict[str, Any]:
    """The web frontend's default graph (Z-Image Turbo, frontend 1.58) as the editor queues it:
    its node ids, widget values and links, in ComfyUI's API format."""
    return {
        "9": {
            "class_type": "SaveImage",
            "inputs": {"filename_prefix": "ComfyUI", "images": ["65", 0]},
        },
        "62": {
            "class_type": "CLIPLoader",
            "inputs": {"clip_name": Z_IMAGE_TEXT_ENCODER, "type": "lumina2", "device": "default"},
        },
        "63": {"class_type": "VAELoader", "inputs": {"vae_name": Z_IMAGE_VAE}},
        "65": {"class_type": "VAEDecode", "inputs": {"samples": ["70", 0], "vae": ["63", 0]}},
        "66": {
            "class_type": "UNETLoader",
            "inputs": {"unet_name": Z_IMAGE_UNET, "weight_dtype": "default"},
        },
        "67": {
            "class_type": "CLIPTextEncode",
            "inputs": {"text": "a fox by a campfire", "clip": ["62", 0]},
        },
        "68": {
            "class_type": "EmptySD3LatentImage",
            "inputs": {"width": size_px, "height": size_px, "batch_size": 1},
        },
        "69": {"class_type": "ModelSamplingAuraFlow", "inputs": {"shift": 3, "model": ["66", 0]}},
        "70": {
            "class_type": "KSampler",
            "inputs": {
                "seed": seed,
                "steps": steps,
                "cfg": 1,
                "sampler_name": "res_multistep",
                "scheduler": "simple",
                "denoise": 1,
                "model": ["69", 0],
                "positive": ["67", 0],
                "negative": ["71", 0],
                "latent_image": ["68", 0],
            },
        },
        "71": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["62", 0]}},
    }
