"""The family guess from a checkpoint's file name: one definition for gateway and workers."""

from __future__ import annotations

import pytest

from gateway.learning import learn as learning
from workers.comfy.families import family_of
from workers.emulator.card import profiles


@pytest.mark.parametrize(
    ("checkpoint", "family"),
    [
        ("sd_xl_base_1.0.safetensors", "sdxl"),
        ("ponyDiffusionV6.safetensors", "sdxl"),
        ("illustriousMix_v10.safetensors", "sdxl"),
        ("Flux1-Dev-fp8.safetensors", "flux"),
        ("sd3.5_large.safetensors", "sd3"),
        ("v1-5-pruned-emaonly.safetensors", "sd15"),
        ("z_image_turbo_bf16.safetensors", "zimage"),
        ("Z-Image-Turbo-Q8_0.gguf", "zimage"),
        ("zimage_base_fp8.safetensors", "zimage"),
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_the_family_comes_from_the_file_name(checkpoint: str | None, family: str) -> None:
    assert family_of(checkpoint) == family


def test_the_gateway_learns_under_the_same_guess() -> None:
    assert learning.family_of is family_of


@pytest.mark.parametrize("profile", profiles.profile_names())
@pytest.mark.parametrize(
    "name", ["z_image_turbo_bf16.safetensors", "Z-Image-Turbo-Q8_0.gguf", "zimage_x.safetensors"]
)
def test_the_emulated_cards_guess_z_image_alike(profile: str, name: str) -> None:
    loaded = profiles.load_profile(profile)
    assert profiles.cost_family(name, loaded) == family_of(name) == "zimage"
    assert loaded.family("zimage").text_encoder_size_mib > 0
