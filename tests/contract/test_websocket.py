"""The WebSocket: connect frame, flag negotiation, the event sequence of one prompt compared with
the real recording, and who receives what (PROTOCOL.md 2)."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from tests.contract import api, events, graphs
from tests.contract.graphs import SAMPLER
from tests.contract.servers import Server
from tests.contract.sockets import open_socket, types

QUIET_S = 0.5
FLAG_PAUSE_S = 0.5
CLIENT_ONLY = {
    "execution_start",
    "execution_cached",
    "executing",
    "executed",
    "execution_success",
    "execution_error",
    "execution_interrupted",
}


async def flush_cache(server: Server, http: httpx.AsyncClient, checkpoints: list[str]) -> None:
    """Run a prompt sharing no node with `graphs.txt2img(checkpoints[0], ..., size=64)`: the
    classic cache then holds nothing the next such prompt can use."""
    if server.gateway:
        # One prompt reaches one worker's cache; `/free` reaches every worker's, and each
        # applies it at once when idle.
        await http.post("/free", json={"free_memory": True})
        await asyncio.sleep(FLAG_PAUSE_S)
        return
    flush = graphs.txt2img(checkpoints[1], api.unique("flush"), seed=api.fresh_seed(), size=72)
    await api.run(http, flush)


@pytest.mark.parametrize("path", ["/ws", "/api/ws"])
async def test_the_first_frame_is_status_with_the_client_id_as_sid(
    server: Server, path: str
) -> None:
    async with open_socket(server, "contract-sid", path=path) as socket:
        assert await socket.recv(10) == {
            "type": "status",
            "data": {"status": {"exec_info": {"queue_remaining": 0}}, "sid": "contract-sid"},
        }


async def test_a_socket_without_client_id_gets_a_hex_sid(server: Server) -> None:
    async with open_socket(server) as socket:
        first = await socket.recv(10)
    assert first["type"] == "status"
    assert re.fullmatch(r"[0-9a-f]{32}", first["data"]["sid"])


async def test_feature_flags_are_answered_with_the_servers_flags(
    server: Server, http: httpx.AsyncClient
) -> None:
    async with open_socket(server, api.unique("flags")) as socket:
        await socket.recv(10)
        await socket.send({"type": "feature_flags", "data": {"supports_preview_metadata": True}})
        answer = await socket.recv(10)
    assert answer == {"type": "feature_flags", "data": (await http.get("/features")).json()}


async def test_an_uncached_prompt_sends_the_recorded_sequence_of_events(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    await flush_cache(server, http, checkpoints)
    client_id = api.unique("order")
    async with open_socket(server, client_id) as socket:
        received = [await socket.recv(10)]
        body = await api.submit(http, graphs.txt2img(checkpoints[0], prefix), client_id=client_id)
        received += await socket.until_done(body["prompt_id"])
        assert socket.binary_frames == []
    recorded = [frame["msg"] for frame in graphs.load_transcript()["ws"]]
    assert events.shapes(received) == events.shapes(recorded)
    for message in received[1:]:
        if message["type"] != "status":
            assert message["data"]["prompt_id"] == body["prompt_id"]
    [executed] = events.of_type(received, "executed")
    assert list(executed["output"]) == ["images"]
    assert server.local_files(executed["output"]["images"]) == [
        {"filename": f"{prefix}_00001_.png", "subfolder": "", "type": "output"}
    ]


async def test_the_sampler_reports_progress_at_every_step(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    client_id = api.unique("steps")
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed(), steps=3)
    async with open_socket(server, client_id) as socket:
        await socket.recv(10)
        body = await api.submit(http, prompt, client_id=client_id)
        received = await socket.until_done(body["prompt_id"])
    progress = events.of_type(received, "progress")
    assert [(p["value"], p["max"], p["node"]) for p in progress] == [
        (1, 3, SAMPLER),
        (2, 3, SAMPLER),
        (3, 3, SAMPLER),
    ]
    sampler: list[tuple[str, float, float]] = []
    for state in events.of_type(received, "progress_state"):
        if SAMPLER in state["nodes"]:
            node = state["nodes"][SAMPLER]
            if not sampler or sampler[-1] != (node["state"], node["value"], node["max"]):
                sampler.append((node["state"], node["value"], node["max"]))
    assert sampler == [
        ("running", 0, 1),
        ("running", 1, 3),
        ("running", 2, 3),
        ("running", 3, 3),
        ("finished", 3, 3),
    ]


async def test_events_of_a_prompt_go_only_to_its_client(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    owner_id, other_id = api.unique("owner"), api.unique("other")
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    async with open_socket(server, owner_id) as owner, open_socket(server, other_id) as other:
        await owner.recv(10)
        await other.recv(10)
        body = await api.submit(http, prompt, client_id=owner_id)
        owned = await owner.until_done(body["prompt_id"])
        seen_by_other = await other.drain(QUIET_S)
    assert CLIENT_ONLY & set(types(owned))
    assert {"progress", "progress_state"} <= set(types(owned))
    assert set(types(seen_by_other)) == {"status"}


async def test_a_prompt_without_client_id_only_broadcasts_status_and_progress(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed(), steps=2)
    async with open_socket(server, api.unique("observer")) as observer:
        await observer.recv(10)
        body = await api.submit(http, prompt)
        await api.wait_history(http, body["prompt_id"])
        seen = await observer.drain(QUIET_S)
    assert set(types(seen)) == {"status", "progress", "progress_state"}
    assert [p["value"] for p in events.of_type(seen, "progress")] == [1, 2]
    assert {s["prompt_id"] for s in events.of_type(seen, "progress_state")} == {body["prompt_id"]}


async def test_status_is_broadcast_when_the_queue_changes(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    async with open_socket(server, api.unique("watcher")) as watcher:
        await watcher.recv(10)
        body = await api.submit(http, prompt)
        await api.wait_history(http, body["prompt_id"])
        seen = await watcher.drain(QUIET_S)
    statuses = [m["data"] for m in seen if m["type"] == "status"]
    assert [s["status"]["exec_info"]["queue_remaining"] for s in statuses] == [1, 1, 0]
    assert all("sid" not in status for status in statuses)
