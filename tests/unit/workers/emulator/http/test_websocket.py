"""The /ws endpoint of a real emulator process (PROTOCOL.md 2.1-2.2), bugs included."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.unit.workers.emulator.conftest import history_entry
from tests.unit.workers.emulator.running import Running, running_emulator, txt2img, until_sampling

pytestmark = pytest.mark.timeout(60)

SERVER_FLAGS = {"supports_preview_metadata": True, "max_upload_size": 104857600}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_emulator(tmp_path_factory.mktemp("ws")) as running:
        yield running


@pytest.fixture
async def http(emulator: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=emulator.url, timeout=10) as client:
        yield client


async def recv_json(ws: ClientConnection, timeout_s: float = 5.0) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout_s))
    return frame


async def silent(ws: ClientConnection, timeout_s: float = 0.5) -> bool:
    try:
        await asyncio.wait_for(ws.recv(), timeout_s)
    except TimeoutError:
        return True
    return False


async def until_done(ws: ClientConnection, prompt_id: str) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = await recv_json(ws)
        frames.append(frame)
        data = frame["data"]
        if frame["type"] == "executing" and data["node"] is None and data["prompt_id"] == prompt_id:
            return frames


async def test_greeting_uses_the_client_id_or_a_fresh_hex_sid(emulator: Running) -> None:
    async with connect(f"{emulator.ws_url}?clientId=client-one") as ws:
        assert await recv_json(ws) == {
            "type": "status",
            "data": {"status": {"exec_info": {"queue_remaining": 0}}, "sid": "client-one"},
        }
    api_url = emulator.ws_url.replace("/ws", "/api/ws")
    async with connect(api_url) as ws:
        sid = (await recv_json(ws))["data"]["sid"]
        assert re.fullmatch(r"[0-9a-f]{32}", sid)


async def test_only_the_first_text_frame_can_negotiate_feature_flags(emulator: Running) -> None:
    flags = json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}})
    async with connect(f"{emulator.ws_url}?clientId=f1") as ws:
        await recv_json(ws)
        await ws.send(flags)
        assert await recv_json(ws) == {"type": "feature_flags", "data": SERVER_FLAGS}
        await ws.send(flags)
        assert await silent(ws)
    async with connect(f"{emulator.ws_url}?clientId=f2") as ws:
        await recv_json(ws)
        await ws.send(json.dumps({"type": "hello"}))
        await ws.send(flags)
        assert await silent(ws)
    async with connect(f"{emulator.ws_url}?clientId=f3") as ws:
        await recv_json(ws)
        await ws.send("not json")  # does not count as the first frame
        await ws.send(flags)
        assert (await recv_json(ws))["type"] == "feature_flags"


async def test_execution_events_reach_only_their_client(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    async with (
        connect(f"{emulator.ws_url}?clientId=owner") as owner,
        connect(f"{emulator.ws_url}?clientId=bystander") as bystander,
    ):
        await recv_json(owner)
        await recv_json(bystander)
        body = {"prompt": txt2img(prefix="owner"), "client_id": "owner"}
        prompt_id = (await http.post("/prompt", json=body)).json()["prompt_id"]
        frames = await until_done(owner, prompt_id)
        assert frames[-1] == {"type": "executing", "data": {"node": None, "prompt_id": prompt_id}}
        seen = [await recv_json(bystander) for _ in range(3)]
        assert [f["type"] for f in seen] == ["status", "status", "status"]
        assert [f["data"]["status"]["exec_info"]["queue_remaining"] for f in seen] == [1, 1, 0]
        assert await silent(bystander)


async def test_a_second_socket_with_the_same_id_is_lost_when_the_first_closes(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    first = await connect(f"{emulator.ws_url}?clientId=dup")
    await recv_json(first)
    async with connect(f"{emulator.ws_url}?clientId=dup") as second:
        await recv_json(second)
        body = {"prompt": txt2img(prefix="dup", seed=11), "client_id": "dup"}
        prompt_id = (await http.post("/prompt", json=body)).json()["prompt_id"]
        await until_done(second, prompt_id)
        assert await silent(first, 0.2)  # replaced: it gets nothing, not even broadcasts
        await first.close()
        await asyncio.sleep(0.2)
        body = {"prompt": txt2img(prefix="dup", seed=12), "client_id": "dup"}
        prompt_id = (await http.post("/prompt", json=body)).json()["prompt_id"]
        await history_entry(http, prompt_id)
        assert await silent(second)  # the 0.3.64 bug: unregistered by the old socket's cleanup


async def test_a_reconnecting_client_is_told_the_running_node(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    await http.post("/emulator/faults", json={"hang_s": 1.5, "hang_at_step": 1})
    body = {"prompt": txt2img(prefix="hang", seed=21), "client_id": "again"}
    prompt_id = (await http.post("/prompt", json=body)).json()["prompt_id"]
    await until_sampling(http)
    async with connect(f"{emulator.ws_url}?clientId=again") as ws:
        assert (await recv_json(ws))["data"]["sid"] == "again"
        assert await recv_json(ws) == {"type": "executing", "data": {"node": "3"}}
        frames = await until_done(ws, prompt_id)
        assert [f["type"] for f in frames[-3:]] == ["execution_success", "status", "executing"]
    async with connect(f"{emulator.ws_url}?clientId=again") as ws:
        await recv_json(ws)
        assert await silent(ws, 0.2)  # nothing runs now: no reconnect frame
