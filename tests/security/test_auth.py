"""The gateway's token guards every route when set: its own, ComfyUI's, the proxied worker
routes (the emulator's fault hooks included) and the WebSocket; only the probes stay open."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.integration.conftest import as_external, gateway_settings, running_gateway
from workers.supervision.launch import FarmLayout, WorkerHandle

TOKEN = "s3cret-gateway-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REFUSED_WITHOUT_TOKEN = [
    ("GET", "/prompt"),
    ("GET", "/system_stats"),
    ("GET", "/history"),
    ("GET", "/queue"),
    ("GET", "/object_info"),
    ("GET", "/gateway/workers"),
    ("GET", "/gateway/workers/bad0"),
    ("GET", "/gateway/jobs/nothing"),
    ("GET", "/metrics"),
    ("GET", "/gateway/"),  # the dashboard, its data and its event stream
    ("GET", "/gateway/dashboard.json"),
    ("GET", "/gateway/events"),
    ("GET", "/internal/logs"),  # proxied to a worker
    ("POST", "/free"),  # proxied to a worker
    ("GET", "/"),  # the web frontend, proxied
]


@pytest.fixture
async def guarded(
    redis_url: str,
    tmp_path: Path,
    security_workers: list[WorkerHandle],
    security_layout: FarmLayout,
) -> AsyncIterator[str]:
    """The URL of a gateway with a token, in front of both session workers."""
    settings = gateway_settings(redis_url, tmp_path, policy="round_robin", auth_token=TOKEN)
    handles = as_external(security_workers)
    async with running_gateway(settings, handles, security_layout.input_dir) as url:
        yield url


@pytest.mark.parametrize(("method", "path"), REFUSED_WITHOUT_TOKEN)
async def test_every_route_but_the_probes_refuses_a_request_without_the_token(
    guarded: str, method: str, path: str
) -> None:
    async with httpx.AsyncClient(base_url=guarded, timeout=10) as http:
        answer = await http.request(method, path)
        assert answer.status_code == 401, answer.text
        error = answer.json()["error"]  # ComfyUI's error shape on ComfyUI's routes
        assert "token" in (error if path.startswith("/gateway") else error["message"])
        assert answer.headers["www-authenticate"].startswith("Bearer")
        wrong = await http.request(method, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401


async def test_only_the_probes_answer_without_the_token(guarded: str) -> None:
    async with httpx.AsyncClient(base_url=guarded, timeout=10) as http:
        assert (await http.get("/gateway/workers")).status_code == 401
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200


async def test_a_fault_hook_cannot_be_armed_through_the_gateway_without_the_token(
    guarded: str, security_workers: list[WorkerHandle]
) -> None:
    marker = f"never-armed-{uuid.uuid4().hex}"
    async with httpx.AsyncClient(timeout=10) as http:
        armed = await http.post(f"{guarded}/emulator/faults", json={"poison": marker})
        seen = [(await http.get(f"{w.url}/emulator/faults")).json() for w in security_workers]
        for worker in security_workers:  # disarm, should it have got through
            await http.post(f"{worker.url}/emulator/faults", json={"poison": None})
    assert armed.status_code == 401, armed.text
    assert all(faults["poison"] != marker for faults in seen)


async def test_the_token_opens_every_route_as_a_header_a_query_parameter_or_a_cookie(
    guarded: str,
) -> None:
    async with httpx.AsyncClient(base_url=guarded, timeout=10) as http:
        by_header = await http.get("/gateway/workers", headers=AUTH)
        assert by_header.status_code == 200, by_header.text
        assert all(w["url"] for w in by_header.json()["workers"])
        assert (await http.get("/internal/logs", headers=AUTH)).status_code == 200
        by_query = await http.get("/system_stats", params={"token": TOKEN})
        assert by_query.status_code == 200, by_query.text
        assert "comfy_gateway_token=" in by_query.headers["set-cookie"]
        assert "httponly" in by_query.headers["set-cookie"].lower()
    async with httpx.AsyncClient(base_url=guarded, timeout=10) as browser:
        first = await browser.get("/", params={"token": TOKEN})  # the web UI, opened once
        assert first.status_code != 401  # the emulator has no web root: its own 404
        assert "comfy_gateway_token=" in first.headers["set-cookie"]
        assert (await browser.get("/system_stats")).status_code == 200  # the cookie from now on
        assert (await browser.get("/internal/logs")).status_code == 200


@pytest.mark.parametrize("how", ["query", "header", "cookie"])
async def test_the_websocket_needs_the_token_as_a_query_parameter_header_or_cookie(
    guarded: str, how: str
) -> None:
    base = guarded.replace("http", "ws", 1) + "/ws?clientId=friend"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(base, open_timeout=10):
            pass
    assert refused.value.response.status_code == 403
    url = base + f"&token={TOKEN}" if how == "query" else base
    headers = {
        "query": {},
        "header": AUTH,
        "cookie": {"Cookie": f"other=1; comfy_gateway_token={TOKEN}"},
    }[how]
    async with connect(url, open_timeout=10, additional_headers=headers) as socket:
        first = json.loads(await socket.recv(decode=True))
    assert first["type"] == "status"
    assert first["data"]["sid"] == "friend"
