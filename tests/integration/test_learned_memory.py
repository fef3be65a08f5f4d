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
    start_emulators,
    stop_emulators,
    txt2img,
)
from workers.supervisor import FarmLayout


async def learned_of(client: ComfyStyleClient) -> dict[str, Any]:
    (worker,) = (await client.http.get("/gateway/workers")).json()["workers"]
    one = (await client.http.get(f"/gateway/workers/{worker['name']}")).json()
    assert one["learned"] == worker["learned"]
    learned: dict[str, Any] = worker["learned"]
    return learned


async def test_a_restarted_gateway_shows_the_speeds_it_learned_before(
    redis_url: str, tmp_path: Path, farm_layout: FarmLayout
) -> None:
    handles = start_emulators(farm_layout, ["remembers"])
    settings = gateway_settings(redis_url, tmp_path)
    try:
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
    finally:
        stop_emulators(handles)
    assert after["restored"] is True
    assert after["restored_from"]["node"] == "test"
    assert after["families"] == before["families"]
    assert after["load_s"] == before["load_s"]
    assert after["resident"] == []
