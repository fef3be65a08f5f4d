"""What the gateway learned about a worker comes back when the gateway restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    started_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout


async def learned_of(client: ComfyStyleClient) -> dict[str, Any]:
    (worker,) = (await client.http.get("/gateway/workers")).json()["workers"]
    one = (await client.http.get(f"/gateway/workers/{worker['name']}")).json()
    assert one["learned"] == worker["learned"]
    learned: dict[str, Any] = worker["learned"]
    return learned


async def test_a_restarted_gateway_shows_the_speeds_it_learned_before(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    settings = gateway_settings(redis_url, tmp_path)
    with started_emulators(farm_layout, ["remembers"]) as handles:
        async with running_gateway(settings, as_external(handles), farm_layout.input_dir) as url:
            client = ComfyStyleClient(url)
            await client.open()
            for seed in range(4):  # the first loads; the next seed, then observe, the speed
                prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "m", seed=seed))
                await client.wait(prompt_id)
            before = await learned_of(client)
            await client.close()
        assert before["restored"] is False
        assert before["families"]["sd15"]["observations"] >= 1
        assert before["resident"] == [CHECKPOINTS[0]]
        async with running_gateway(settings, as_external(handles), farm_layout.input_dir) as url:
            client = ComfyStyleClient(url)
            after = await learned_of(client)
            await client.http.aclose()
    assert after["restored"] is True
    assert after["restored_from"]["node"] == "test"
    assert after["families"] == before["families"]
    assert after["load_s"] == before["load_s"]
    assert after["resident"] == []


def ws_images(prompt: dict[str, Any]) -> dict[str, Any]:
    """ComfyUI's websockets_api_example_ws_images.py: the same graph, its images sent back on
    the socket by a SaveImageWebsocket node instead of saved."""
    graph = {node: body for node, body in prompt.items() if body["class_type"] != "SaveImage"}
    save = {"class_type": "SaveImageWebsocket", "inputs": {"images": ["8", 0]}}
    return {**graph, "save_image_websocket_node": save}


async def test_a_fresh_farm_learns_what_ran_and_a_cached_sampler_teaches_nothing(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    """ComfyUI's websockets_api_example.py four times (the same graph: the first loads, the
    others are cached end to end), then its ws-images variant (its sampler cached): the family
    is learned from the one sampler that ran; the cached run changes nothing, in Redis either."""
    settings = gateway_settings(redis_url, tmp_path)
    prompt = txt2img(CHECKPOINTS[2], "example", seed=5, steps=20, size=1024)
    with started_emulators(farm_layout, ["learns"]) as handles:
        async with running_gateway(settings, as_external(handles), farm_layout.input_dir) as url:
            client = ComfyStyleClient(url)
            await client.open()
            for _ in range(4):
                await client.wait(await client.queue_prompt(prompt))
            learned = await learned_of(client)
            await client.wait(await client.queue_prompt(ws_images(prompt)))
            after = await learned_of(client)
            await client.close()
        async with running_gateway(settings, as_external(handles), farm_layout.input_dir) as url:
            client = ComfyStyleClient(url)
            restored = await learned_of(client)
            await client.http.aclose()
    assert set(learned["families"]) == {"sdxl"}
    assert learned["families"]["sdxl"]["units_per_s"] > 0
    assert after["families"] == learned["families"]
    assert restored["families"] == learned["families"]
