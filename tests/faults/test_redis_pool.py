"""Bursts past the Redis pool wait for a connection instead of failing: 200 concurrent
`POST /prompt` and 500 WebSockets opened at once, against the default settings (redis-py's
own pool refused past 100 concurrent commands: 503s, and sockets closed before their first
frame)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    started_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout

pytestmark = pytest.mark.timeout(90)
TOKEN = "burst-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def gateway_url(redis_url: str, tmp_path: Path) -> AsyncIterator[str]:
    layout = FarmLayout(tmp_path / "workers", tmp_path / "input", 0.01)
    with started_emulators(layout, ["burst"]) as handles:
        settings = gateway_settings(redis_url, tmp_path, auth_token=TOKEN)
        async with running_gateway(settings, as_external(handles), layout.input_dir) as url:
            # Drained: the burst is only accepted, so the test measures intake, not the runs.
            async with httpx.AsyncClient() as http:
                drain = await http.post(f"{url}/gateway/workers/burst/drain", headers=AUTH)
            assert drain.status_code == 200, drain.text
            yield url


async def test_200_concurrent_prompts_are_all_accepted(gateway_url: str) -> None:
    limits = httpx.Limits(max_connections=200)
    client = httpx.AsyncClient(base_url=gateway_url, timeout=60, limits=limits, headers=AUTH)
    async with client as http:

        async def post(seed: int) -> int:
            body = {"prompt": txt2img(CHECKPOINTS[0], "burst", seed=seed)}
            return (await http.post("/prompt", json=body)).status_code

        codes = await asyncio.gather(*(post(seed) for seed in range(200)))
    assert {code: codes.count(code) for code in set(codes)} == {200: 200}


async def test_500_websockets_opened_at_once_all_get_their_status_frame(gateway_url: str) -> None:
    url = gateway_url.replace("http", "ws", 1)

    async def client(index: int) -> str:
        try:
            ws_url = f"{url}/ws?clientId=burst{index}&token={TOKEN}"
            async with connect(ws_url, open_timeout=60) as socket:
                first = json.loads(await asyncio.wait_for(socket.recv(), 60))
                return str(first["type"])
        except Exception as exc:
            return type(exc).__name__

    outcome = await asyncio.gather(*(client(index) for index in range(500)))
    assert {o: outcome.count(o) for o in set(outcome)} == {"status": 500}
