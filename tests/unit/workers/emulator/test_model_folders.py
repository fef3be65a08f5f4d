"""Model folders beyond checkpoints: listed in object_info and /models, validated, and the web
frontend's default graph (Z-Image Turbo: UNETLoader, CLIPLoader, VAELoader) run node by node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.unit.workers.comfy.prompts import (
    Z_IMAGE_TEXT_ENCODER,
    Z_IMAGE_UNET,
    Z_IMAGE_VAE,
    z_image_turbo_graph,
)
from tests.unit.workers.emulator.conftest import Factory, run_to_history
from tests.unit.workers.emulator.execution.test_execution import listen, run
from workers.emulator.card.costmodel import LoadTier
from workers.emulator.http.state import Emulator

pytestmark = pytest.mark.timeout(30)


def combo(info: dict[str, Any], class_type: str, name: str) -> Any:
    return info[class_type]["input"]["required"][name][0]


async def test_the_default_catalogue_lists_the_frontends_default_graph_files(
    client: httpx.AsyncClient,
) -> None:
    info = (await client.get("/object_info")).json()
    assert combo(info, "UNETLoader", "unet_name") == [Z_IMAGE_UNET]
    assert combo(info, "CLIPLoader", "clip_name") == [Z_IMAGE_TEXT_ENCODER]
    assert combo(info, "DualCLIPLoader", "clip_name2") == [Z_IMAGE_TEXT_ENCODER]
    assert combo(info, "VAELoader", "vae_name") == [Z_IMAGE_VAE, "pixel_space"]
    assert combo(info, "LoraLoader", "lora_name") == []
    assert (await client.get("/models/diffusion_models")).json() == [Z_IMAGE_UNET]
    assert (await client.get("/models/text_encoders")).json() == [Z_IMAGE_TEXT_ENCODER]


async def test_each_folder_lists_the_files_it_was_given(make_app: Factory) -> None:
    models = {"loras": ("detail.safetensors", "add.safetensors"), "vae": ()}
    client, _ = await make_app(models=models)
    info = (await client.get("/object_info")).json()
    assert combo(info, "LoraLoaderModelOnly", "lora_name") == [
        "add.safetensors",
        "detail.safetensors",
    ]
    assert combo(info, "VAELoader", "vae_name") == ["pixel_space"]
    assert combo(info, "UNETLoader", "unet_name") == []
    assert (await client.get("/models/loras")).json() == ["add.safetensors", "detail.safetensors"]


async def test_a_legacy_folder_name_is_no_route_as_in_comfyui(client: httpx.AsyncClient) -> None:
    assert (await client.get("/models/unet")).status_code == 404
    assert (await client.get("/models/clip")).status_code == 404


async def test_a_diffusion_model_the_instance_lacks_is_value_not_in_list(
    client: httpx.AsyncClient,
) -> None:
    prompt = z_image_turbo_graph()
    prompt["66"]["inputs"]["unet_name"] = "flux1-dev.safetensors"
    response = await client.post("/prompt", json={"prompt": prompt})
    assert response.status_code == 400
    errors = response.json()["node_errors"]["66"]["errors"]
    assert [e["type"] for e in errors] == ["value_not_in_list"]
    assert "unet_name" in errors[0]["details"]


async def test_the_z_image_graph_runs_every_node_and_saves_its_image(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    entry = await run(client, emulator, z_image_turbo_graph(size_px=256), client_id="c1")
    assert entry["status"]["status_str"] == "success"
    ran = [node for node in recorder.executing() if node is not None]
    assert sorted(ran) == sorted(z_image_turbo_graph())
    assert [p["value"] for p in recorder.of("progress")] == list(range(1, 9))
    image = entry["outputs"]["9"]["images"][0]
    with Image.open(Path(emulator.dirs.output) / image["filename"]) as png:
        assert png.size == (256, 256)


async def test_its_loads_cost_the_diffusion_model_text_encoder_and_vae_files(
    make_app: Factory,
) -> None:
    slept: list[float] = []
    now = [0.0]

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    client, emulator = await make_app(sleep=sleep, clock=lambda: now[0], time_scale=1.0)
    await run_to_history(client, {"prompt": z_image_turbo_graph(steps=2)})
    costs, family = emulator.engine.costs, emulator.config.profile.family("zimage")
    unet = costs.read_s("zimage", LoadTier.DISK)
    text_encoder = costs.node_s() + costs.file_read_s(
        "zimage", family.text_encoder_size_mib, LoadTier.DISK
    )
    vae = costs.node_s() + costs.file_read_s("zimage", family.vae_size_mib, LoadTier.DISK)
    step = costs.sample_step_s("zimage", 1.0, 1)
    assert step > costs.sample_step_s("sdxl", 1.0, 1)
    for seconds in (unet, text_encoder, vae, costs.clip_encode_s("zimage"), step):
        assert pytest.approx(seconds) in slept
    assert sum(1 for seconds in slept if seconds == pytest.approx(step)) == 2


async def test_a_second_run_reads_nothing_again(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    await run(client, emulator, z_image_turbo_graph(seed=1), client_id="c1")
    recorder.frames.clear()
    await run(client, emulator, z_image_turbo_graph(seed=2), client_id="c1")
    cached = recorder.of("execution_cached")[0]["nodes"]
    assert {"62", "63", "66", "67", "71"} <= set(cached)
    assert emulator.engine.residency.resident() == (Z_IMAGE_UNET,)
