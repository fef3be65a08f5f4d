"""A client of one node uses the whole farm: prompts validated against every node's workers
and run where they fit, events, history, queue, files, uploads and interrupts across nodes."""

from __future__ import annotations

import httpx

from tests.faults.farms import AUTH, GatewayProcess
from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.multihost.conftest import ONLY_B, client_of

Nodes = list[GatewayProcess]


async def test_a_prompt_for_a_checkpoint_only_another_node_has_runs_there(
    split_farm: Nodes,
) -> None:
    a, b = split_farm
    async with client_of(a.url) as client:
        prompt_id = await client.queue_prompt(txt2img(ONLY_B, "across"))
        entry = await client.wait(prompt_id)
        assert entry["status"]["status_str"] == "success"
        assert entry["gateway"]["worker"] == "wb"
        assert client.events_of(prompt_id).count("execution_success") == 1
        image = entry["outputs"]["9"]["images"][0]
        assert image["subfolder"] == "wb"
        async with httpx.AsyncClient(headers=AUTH, timeout=10) as http:
            through_a = await http.get(a.url + "/view", params=image)
            from_b = await http.get(b.url + "/view", params=image)
            on_b = (await http.get(b.url + f"/history/{prompt_id}")).json()
        assert through_a.status_code == 200, through_a.text
        assert through_a.content[:8] == b"\x89PNG\r\n\x1a\n"
        assert through_a.content == from_b.content
        assert on_b[prompt_id]["outputs"] == entry["outputs"]


async def test_a_checkpoint_no_live_node_has_is_refused_as_comfyui_would(
    split_farm: Nodes,
) -> None:
    a, _ = split_farm
    async with client_of(a.url) as client:
        answer = await client.post(txt2img(CHECKPOINTS[1], "nowhere"))
    assert answer.status_code == 400
    errors = answer.json()["node_errors"]["4"]["errors"]
    assert errors[0]["type"] == "value_not_in_list"


async def test_an_upload_to_one_node_is_served_by_the_other(split_farm: Nodes) -> None:
    a, b = split_farm
    image = b"\x89PNG\r\n\x1a\n" + b"upload across nodes"
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as http:
        files = {"image": ("shared.png", image, "image/png")}
        stored = await http.post(a.url + "/upload/image", files=files, data={"subfolder": "x"})
        assert stored.status_code == 200, stored.text
        params = {"filename": stored.json()["name"], "type": "input", "subfolder": "x"}
        on_b = await http.get(b.url + "/view", params=params)
    assert on_b.status_code == 200
    assert on_b.content == image


async def test_a_prompt_running_on_another_node_is_listed_and_interrupted_through_this_one(
    split_farm: Nodes,
) -> None:
    a, _ = split_farm
    async with client_of(a.url) as client:
        # Minutes of emulated work at 512x512: it runs until interrupted, on a loaded machine too.
        prompt_id = await client.queue_prompt(txt2img(ONLY_B, "long", steps=5000, size=512))
        await client.job_in(prompt_id, ("running",))
        queue = (await client.http.get("/queue")).json()
        assert [item[1] for item in queue["queue_running"]] == [prompt_id]
        interrupted = await client.http.post("/interrupt", json={"prompt_id": prompt_id})
        assert interrupted.status_code == 200
        entry = await client.wait(prompt_id, timeout_s=20)
    assert entry["gateway"]["worker"] == "wb"
    assert "execution_interrupted" in client.events_of(prompt_id), (
        client.events_of(prompt_id),
        entry["status"],
    )
    assert entry["status"]["status_str"] == "error"
