"""POST /prompt, /queue, /history, /interrupt in process, against PROTOCOL.md sections 1.1-1.3."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.unit.workers.emulator.conftest import (
    Factory,
    no_warmup_profile,
    run_to_history,
    wait_for,
)
from tests.unit.workers.emulator.running import transcript, txt2img
from workers.emulator.http.state import Emulator

pytestmark = pytest.mark.timeout(30)

NO_PROMPT = {
    "error": {
        "type": "no_prompt",
        "message": "No prompt provided",
        "details": "No prompt provided",
        "extra_info": {},
    },
    "node_errors": {},
}


async def numbers(client: httpx.AsyncClient, bodies: list[dict[str, Any]]) -> list[Any]:
    found = []
    for body in bodies:
        response = await client.post("/prompt", json=body)
        found.append(response.json().get("number", response.status_code))
    return found


async def test_number_follows_comfyui_counter_rules(client: httpx.AsyncClient) -> None:
    prompt = txt2img()
    bodies: list[dict[str, Any]] = [
        {"prompt": prompt},
        {"prompt": prompt},
        {"prompt": prompt, "front": True},
        {"prompt": prompt, "number": 7.5},  # explicit: counter untouched
        {"prompt": prompt, "number": 12},  # float() of it, as ComfyUI
        {"client_id": "x"},  # no_prompt still advances the counter
        {"prompt": prompt, "front": 0},
    ]
    assert await numbers(client, bodies) == [0, 1, -2, 7.5, 12.0, 400, 4]


async def test_missing_prompt_is_no_prompt(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/prompt", json={"number": 3})
    assert (response.status_code, response.json()) == (400, NO_PROMPT)


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2", "é".encode("latin-1")])
async def test_a_body_comfyui_cannot_parse_is_its_500(
    client: httpx.AsyncClient, body: bytes
) -> None:
    response = await client.post("/prompt", content=body)
    assert response.status_code == 500
    assert response.text == "500 Internal Server Error\n\nServer got itself in trouble"
    assert response.headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize(
    ("prompt", "status"),
    [([], 400), ("", 400), ("x", 500), (None, 500), (5, 500), ({"1": 5}, 500), ({"1": None}, 500)],
)
async def test_malformed_prompts_answer_as_comfyui(
    client: httpx.AsyncClient, prompt: Any, status: int
) -> None:
    response = await client.post("/prompt", json={"prompt": prompt})
    assert response.status_code == status
    if status == 400:
        assert response.json()["error"]["type"] == "prompt_no_outputs"


async def test_a_string_node_reads_as_missing_class_type(client: httpx.AsyncClient) -> None:
    response = await client.post("/prompt", json={"prompt": {"7": "text"}})
    assert response.status_code == 400
    assert response.json()["error"]["details"] == "Node ID '#7'"


async def test_prompt_id_is_taken_as_given_or_minted(client: httpx.AsyncClient) -> None:
    given = await client.post("/prompt", json={"prompt": txt2img(), "prompt_id": "not-a-uuid-123"})
    assert given.json()["prompt_id"] == "not-a-uuid-123"
    numeric = await client.post("/prompt", json={"prompt": txt2img(), "prompt_id": 5})
    assert numeric.json()["prompt_id"] == "5"
    minted = (await client.post("/prompt", json={"prompt": txt2img()})).json()["prompt_id"]
    assert str(uuid.UUID(minted)) == minted


async def test_valid_outputs_run_and_invalid_ones_are_reported(client: httpx.AsyncClient) -> None:
    prompt = txt2img()
    prompt["12"] = {"class_type": "ImageInvert", "inputs": {"image": ["99", 0]}}
    prompt["10"] = {
        "class_type": "SaveImage",
        "inputs": {"images": ["12", 0], "filename_prefix": "bad"},
    }
    response = await client.post("/prompt", json={"prompt": prompt})
    assert response.status_code == 200
    assert set(response.json()["node_errors"]) == {"12"}
    assert response.json()["node_errors"]["12"]["dependent_outputs"] == ["10"]


async def test_queue_and_history_show_coerced_values_and_client_id(
    client: httpx.AsyncClient,
) -> None:
    prompt = txt2img()
    prompt["3"]["inputs"]["cfg"] = 7
    body = {"prompt": prompt, "client_id": "c9", "extra_data": {"client_id": "old", "k": 1}}
    entry = await run_to_history(client, body)
    _, _, stored, extra, outputs = entry["prompt"]
    assert stored["3"]["inputs"]["cfg"] == 7.0
    assert isinstance(stored["3"]["inputs"]["cfg"], float)
    assert extra == {"client_id": "c9", "k": 1}
    assert outputs == ["9"]
    assert entry["status"]["status_str"] == "success"
    assert [m[0] for m in entry["status"]["messages"]] == [
        "execution_start",
        "execution_cached",
        "execution_success",
    ]


async def test_sensitive_extra_data_is_dropped_from_history(client: httpx.AsyncClient) -> None:
    extra = {"api_key_comfy_org": "secret", "auth_token_comfy_org": "t", "keep": True}
    entry = await run_to_history(client, {"prompt": txt2img(), "extra_data": extra})
    assert entry["prompt"][3] == {"keep": True}


async def long_running(client: httpx.AsyncClient, emulator: Emulator, **fields: Any) -> str:
    """Queue a prompt that samples for minutes at time scale 1; return once it samples."""
    body = {"prompt": txt2img(steps=10000, prefix="long"), **fields}
    prompt_id: str = (await client.post("/prompt", json=body)).json()["prompt_id"]
    await wait_for(lambda: emulator.engine.instance.steps_sampled > 0)
    assert emulator.queue.running_ids() == [prompt_id]
    return prompt_id


async def test_pending_queue_is_the_raw_heap(make_app: Factory) -> None:
    client, emulator = await make_app(time_scale=1.0, profile=no_warmup_profile())
    running = await long_running(client, emulator)
    for body in ({"number": 14}, {"number": 13}, {"front": True}):
        await client.post("/prompt", json={"prompt": txt2img(), **body})
    queue = (await client.get("/queue")).json()
    assert [item[1] for item in queue["queue_running"]] == [running]
    assert len(queue["queue_running"][0]) == 5
    assert [item[0] for item in queue["queue_pending"]] == [-1, 14.0, 13.0]
    assert (await client.get("/prompt")).json() == {"exec_info": {"queue_remaining": 4}}
    await client.post("/interrupt")


async def test_queue_delete_and_clear_leave_the_running_prompt(make_app: Factory) -> None:
    client, emulator = await make_app(time_scale=1.0, profile=no_warmup_profile())
    running = await long_running(client, emulator)
    ids = [
        (await client.post("/prompt", json={"prompt": txt2img()})).json()["prompt_id"]
        for _ in range(3)
    ]
    response = await client.post("/queue", json={"delete": [ids[1], "unknown"]})
    assert (response.status_code, response.content) == (200, b"")
    assert [item[1] for item in (await client.get("/queue")).json()["queue_pending"]] == [
        ids[0],
        ids[2],
    ]
    await client.post("/queue", json={"clear": True})
    queue = (await client.get("/queue")).json()
    assert (queue["queue_pending"], [i[1] for i in queue["queue_running"]]) == ([], [running])
    await client.post("/interrupt", json={"prompt_id": running})


async def test_interrupt_only_stops_the_named_running_prompt(make_app: Factory) -> None:
    client, emulator = await make_app(time_scale=1.0, profile=no_warmup_profile())
    running = await long_running(client, emulator)
    await client.post("/interrupt", json={"prompt_id": "someone-else"})
    assert not emulator.engine.interrupted
    response = await client.post("/interrupt", json={"prompt_id": running})
    assert (response.status_code, response.content) == (200, b"")
    entry = await wait_for(lambda: emulator.queue.history(prompt_id=running))
    status = entry[running]["status"]
    assert (status["status_str"], status["completed"]) == ("error", False)
    kind, data = status["messages"][-1]
    assert kind == "execution_interrupted"
    assert (data["node_id"], data["node_type"]) == ("3", "KSampler")
    assert data["executed"] == ["4", "5", "7", "6"]


@pytest.mark.parametrize("body", [None, b"", b"not json", b"{}"])
async def test_interrupt_without_prompt_id_is_global(make_app: Factory, body: bytes | None) -> None:
    client, emulator = await make_app(time_scale=1.0, profile=no_warmup_profile())
    running = await long_running(client, emulator)
    await client.post("/interrupt", content=body)
    entry = await wait_for(lambda: emulator.queue.history(prompt_id=running))
    assert entry[running]["status"]["messages"][-1][0] == "execution_interrupted"


async def test_history_paging_and_deletion(client: httpx.AsyncClient) -> None:
    ids = []
    for seed in range(4):
        entry = await run_to_history(client, {"prompt": txt2img(seed=seed)})
        ids.append(entry["prompt"][1])
    assert list((await client.get("/history")).json()) == ids
    assert list((await client.get("/history", params={"max_items": 2})).json()) == ids[2:]
    paged = await client.get("/history", params={"max_items": 2, "offset": 1})
    assert list(paged.json()) == ids[1:3]
    assert (await client.get("/history", params={"max_items": "x"})).status_code == 500
    await client.post("/history", json={"delete": [ids[0]]})
    assert list((await client.get("/history")).json()) == ids[1:]
    await client.post("/history", json={"clear": True})
    assert (await client.get("/history")).json() == {}


async def test_a_repeated_prompt_id_overwrites_its_history_entry(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    await run_to_history(client, {"prompt": txt2img(seed=1), "prompt_id": "same"})
    other = await run_to_history(client, {"prompt": txt2img(seed=2)})
    await client.post("/prompt", json={"prompt": txt2img(seed=3), "prompt_id": "same"})
    await wait_for(lambda: emulator.engine.counts.succeeded == 3)
    history = (await client.get("/history")).json()
    assert list(history) == ["same", other["prompt"][1]]  # the key keeps its place
    assert history["same"]["prompt"][2]["3"]["inputs"]["seed"] == 3


async def test_recorded_queue_and_prompt_bodies_when_idle(client: httpx.AsyncClient) -> None:
    assert (await client.get("/queue")).json() == {"queue_running": [], "queue_pending": []}
    assert (await client.get("/api/prompt")).json() == {"exec_info": {"queue_remaining": 0}}
    recorded = transcript()["responses"]["post_prompt"]["body"]
    assert re.fullmatch(r"[0-9a-f-]{36}", recorded["prompt_id"])
