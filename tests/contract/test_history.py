"""GET/POST /history (PROTOCOL.md 1.3)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.contract import api, graphs
from tests.contract.graphs import SAVE
from tests.contract.servers import NO_TOKEN, Server


@pytest.mark.parametrize("path", ["/history", "/api/history"])
async def test_history_of_an_unknown_id_is_empty_with_200(
    http: httpx.AsyncClient, path: str
) -> None:
    response = await http.get(f"{path}/{api.unique('unknown')}")
    assert response.status_code == 200
    assert response.json() == {}


async def test_a_finished_prompt_has_a_full_history_entry(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    body = await api.submit(http, prompt, client_id="history-client")
    prompt_id = body["prompt_id"]
    entry = await api.wait_history(http, prompt_id)
    comfyui_keys = {"prompt", "outputs", "status", "meta"}
    # The gateway adds one block of its own: where the prompt ran and how often it was tried.
    assert set(entry) == (comfyui_keys | {"gateway"} if server.gateway else comfyui_keys)
    if server.gateway:
        block = entry.pop("gateway")
        assert block["attempts"] == 1 and block["state"] == "success"
        assert block["worker"] and block["group"]
        assert block["enqueued_at_ms"] <= block["started_at_ms"] <= block["finished_at_ms"]
    assert entry["prompt"] == [
        body["number"],
        prompt_id,
        prompt,
        {"client_id": "history-client"},
        [SAVE],
    ]
    assert list(entry["outputs"]) == [SAVE]
    assert list(entry["outputs"][SAVE]) == ["images"]
    assert server.local_files(entry["outputs"][SAVE]["images"]) == [
        {"filename": f"{prefix}_00001_.png", "subfolder": "", "type": "output"}
    ]
    assert entry["meta"] == {
        SAVE: {"node_id": SAVE, "display_node": SAVE, "parent_node": None, "real_node_id": SAVE}
    }
    status = entry["status"]
    assert (status["status_str"], status["completed"]) == ("success", True)
    kinds = [kind for kind, _ in status["messages"]]
    assert kinds == ["execution_start", "execution_cached", "execution_success"]
    now_ms = time.time() * 1000
    for _, data in status["messages"]:
        assert data["prompt_id"] == prompt_id
        assert isinstance(data["timestamp"], int)
        assert now_ms - 600_000 < data["timestamp"] <= now_ms + 1000


async def test_a_subfolder_in_the_prefix_is_reported_apart(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    entry = await api.run(http, graphs.txt2img(checkpoints[0], f"{prefix}/img", seed=1))
    assert server.local_files(api.images(entry, SAVE)) == [
        {"filename": "img_00001_.png", "subfolder": prefix, "type": "output"}
    ]


async def test_history_lists_entries_oldest_first_and_max_items_keeps_the_newest(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    ids = []
    for _ in range(3):
        body = await api.submit(http, graphs.txt2img(checkpoints[0], prefix, seed=1))
        ids.append(body["prompt_id"])
    for prompt_id in ids if server.gateway else ids[-1:]:
        await api.wait_history(http, prompt_id)
    newest = list((await http.get("/history")).json())[-3:]
    if server.gateway:
        # By design the three may run side by side on two workers: entries are listed in the
        # order the gateway recorded their ends, which need not be the order they were sent in.
        assert sorted(newest) == sorted(ids)
    else:
        assert newest == ids
    assert list((await http.get("/history", params={"max_items": 2})).json()) == newest[1:]
    assert list((await http.get("/history", params={"max_items": 1})).json()) == newest[2:]


async def test_delete_removes_one_entry(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    kept = (await api.submit(http, graphs.txt2img(checkpoints[0], prefix, seed=1)))["prompt_id"]
    gone = (await api.submit(http, graphs.txt2img(checkpoints[0], prefix, seed=1)))["prompt_id"]
    if server.gateway:  # by design the two may run side by side: the first may end last
        await api.wait_history(http, kept)
    await api.wait_history(http, gone)
    response = await http.post("/history", json={"delete": [gone]})
    assert response.status_code == 200
    assert response.content == b""
    assert (await http.get(f"/history/{gone}")).json() == {}
    assert kept in (await http.get(f"/history/{kept}")).json()


async def test_clear_empties_the_history(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    await api.run(http, graphs.txt2img(checkpoints[0], prefix, seed=1))
    if server.gateway:
        # A gateway clears everyone's history only for a client with its operator token.
        refused = await http.post("/api/history", json={"clear": True}, headers=NO_TOKEN)
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "unauthorized"
        assert (await http.get("/history")).json() != {}
    response = await http.post(
        "/api/history", json={"clear": True}, headers=server.operator_headers
    )
    assert response.status_code == 200
    assert response.content == b""
    assert (await http.get("/history")).json() == {}
