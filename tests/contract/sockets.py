"""A WebSocket client of ComfyUI's `/ws`: read JSON frames until a condition, with deadlines."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect

from tests.contract.servers import Server

Message = dict[str, Any]


class Socket:
    """One open socket; text frames are parsed, binary frames (previews) are kept apart."""

    def __init__(self, conn: ClientConnection):
        self._conn = conn
        self.binary_frames: list[bytes] = []

    async def send(self, message: Message) -> None:
        await self._conn.send(json.dumps(message))

    async def recv(self, timeout_s: float) -> Message:
        """The next text frame; TimeoutError when none comes within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            frame = await asyncio.wait_for(self._conn.recv(), remaining)
            if isinstance(frame, bytes):
                self.binary_frames.append(frame)
                continue
            message: Message = json.loads(frame)
            return message

    async def until(
        self, stop: Callable[[Message], bool], timeout_s: float = 90.0
    ) -> list[Message]:
        """Frames up to and including the first one for which `stop` is true."""
        deadline = time.monotonic() + timeout_s
        seen: list[Message] = []
        while True:
            remaining = deadline - time.monotonic()
            try:
                message = await self.recv(remaining)
            except TimeoutError:
                raise AssertionError(f"condition not met after {timeout_s}s: {seen}") from None
            seen.append(message)
            if stop(message):
                return seen

    async def until_done(self, prompt_id: str, timeout_s: float = 90.0) -> list[Message]:
        """Frames up to the `executing {node: null}` that ends `prompt_id`."""
        return await self.until(lambda m: is_done(m, prompt_id), timeout_s)

    async def drain(self, quiet_s: float) -> list[Message]:
        """Every frame until none has come for `quiet_s`."""
        seen: list[Message] = []
        while True:
            try:
                seen.append(await self.recv(quiet_s))
            except TimeoutError:
                return seen


def is_done(message: Message, prompt_id: str) -> bool:
    data = message["data"]
    return (
        message["type"] == "executing"
        and data.get("node") is None
        and data.get("prompt_id") == prompt_id
    )


@asynccontextmanager
async def open_socket(
    server: Server, client_id: str | None = None, *, path: str = "/ws"
) -> AsyncIterator[Socket]:
    """Connect to `path` (`/ws` or `/api/ws`) with `clientId`, closed on exit."""
    url = server.ws_url.removesuffix("/ws") + path
    if client_id is not None:
        url += f"?clientId={quote(client_id)}"
    headers = server.operator_headers
    async with connect(url, max_size=None, ping_interval=None, additional_headers=headers) as conn:
        yield Socket(conn)


def types(messages: list[Message]) -> list[str]:
    return [m["type"] for m in messages]
