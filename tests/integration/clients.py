"""A ComfyUI-style client, as script_examples/websockets_api_example.py uses the API."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect


@dataclass
class ComfyStyleClient:
    """One client id, one event socket, and what it has seen; with a `token`, it sends the
    gateway's bearer token on every request and on the WebSocket handshake."""

    base_url: str
    client_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    token: str | None = None
    http: httpx.AsyncClient = field(init=False)
    socket: ClientConnection | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    binary: list[bytes] = field(default_factory=list)
    done: dict[str, asyncio.Event] = field(default_factory=dict)
    _reader: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=30, headers=self._auth())

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def open(self, timeout_s: float = 10) -> None:
        url = self.base_url.replace("http", "ws", 1) + f"/ws?clientId={self.client_id}"
        self.socket = await connect(
            url, max_size=None, open_timeout=timeout_s, additional_headers=self._auth()
        )
        try:
            async with asyncio.timeout(timeout_s):
                first = json.loads(await self.socket.recv())
        except TimeoutError:
            raise AssertionError(f"no status frame on /ws within {timeout_s}s") from None
        assert first["type"] == "status"
        assert first["data"]["sid"] == self.client_id
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.socket is not None
        async for message in self.socket:
            if isinstance(message, bytes):
                self.binary.append(message)
                continue
            event = json.loads(message)
            self.events.append(event)
            data = event.get("data") or {}
            if event["type"] == "executing" and data.get("node") is None and data.get("prompt_id"):
                self.done.setdefault(data["prompt_id"], asyncio.Event()).set()

    async def post(self, prompt: dict[str, Any], **extra: Any) -> httpx.Response:
        body = {"prompt": prompt, "client_id": self.client_id, **extra}
        return await self.http.post("/prompt", json=body)

    async def queue_prompt(self, prompt: dict[str, Any], **extra: Any) -> str:
        response = await self.post(prompt, **extra)
        assert response.status_code == 200, response.text
        prompt_id: str = response.json()["prompt_id"]
        self.done.setdefault(prompt_id, asyncio.Event())
        return prompt_id

    async def wait(self, prompt_id: str, timeout_s: float = 30) -> dict[str, Any]:
        """Wait for `executing null`, then read the history entry (it must be there)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.done.setdefault(prompt_id, asyncio.Event()).wait()
        except TimeoutError:
            seen = self.events_of(prompt_id)
            raise AssertionError(
                f"no 'executing null' for {prompt_id} within {timeout_s}s; its events: {seen}"
            ) from None
        history = (await self.http.get(f"/history/{prompt_id}")).json()
        assert prompt_id in history, f"no history for {prompt_id} after executing null"
        entry: dict[str, Any] = history[prompt_id]
        return entry

    async def job(self, prompt_id: str) -> dict[str, Any]:
        """The gateway's record of a job: its worker, attempts, timestamps."""
        job: dict[str, Any] = (await self.http.get(f"/gateway/jobs/{prompt_id}")).json()
        return job

    async def job_in(
        self, prompt_id: str, states: tuple[str, ...], timeout_s: float = 10
    ) -> dict[str, Any]:
        """The gateway's record of the job once it is in one of `states`; fails the test past
        `timeout_s`."""
        deadline_s = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline_s:
            job = await self.job(prompt_id)
            if job.get("state") in states:
                return job
            await asyncio.sleep(0.05)
        pytest.fail(f"job {prompt_id} never reached {states}: {await self.job(prompt_id)}")

    def events_of(self, prompt_id: str) -> list[str]:
        return [
            e["type"]
            for e in self.events
            if isinstance(e.get("data"), dict) and e["data"].get("prompt_id") == prompt_id
        ]

    def prompt_ids_seen(self) -> set[str]:
        return {
            e["data"]["prompt_id"]
            for e in self.events
            if isinstance(e.get("data"), dict) and e["data"].get("prompt_id")
        }

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()
        if self._reader is not None:
            async with asyncio.timeout(15):  # the socket's close handshake waits 10s at most
                await self._reader
        await self.http.aclose()
