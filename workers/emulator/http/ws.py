"""The WebSocket side: the socket registry, the ordered publisher, and the `/ws` endpoint.

Reproduced from ComfyUI 0.3.64 on purpose, bugs included (PROTOCOL.md 2.1): one entry per
sid; reconnecting with the same `clientId` replaces the entry (the old socket stays open and
gets nothing), and when the old socket closes its cleanup removes the sid, so the new socket
is silently unregistered. Only the first text frame is read (feature_flags negotiation).
Events leave in emit order through one publisher task, as ComfyUI's publish_loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from workers.emulator.execution import events
from workers.emulator.execution.events import Event, Message
from workers.emulator.http.responses import text

log = logging.getLogger(__name__)


class Socket(Protocol):
    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...


class SocketHub:
    """Connected sockets by sid, their negotiated flags, and the outgoing event queue."""

    def __init__(
        self,
        server_features: Mapping[str, Any],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.server_features = dict(server_features)
        self.sockets: dict[str, Socket] = {}
        self.metadata: dict[str, dict[str, Any]] = {}
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._clock, self._sleep = clock, sleep
        self._stalled_until = 0.0

    def emit(self, event: Event) -> None:
        self._queue.put_nowait(event)

    def stall_for(self, seconds: float) -> None:
        """Hold every outgoing event for `seconds` (delivered, in order, afterwards)."""
        self._stalled_until = max(self._stalled_until, self._clock() + seconds)

    def end_stall(self) -> None:
        self._stalled_until = 0.0

    @property
    def stalled(self) -> bool:
        return self._clock() < self._stalled_until

    async def run(self) -> None:
        """The publisher: deliver queued events forever (cancel the task to stop)."""
        while True:
            event = await self._queue.get()
            while (remaining := self._stalled_until - self._clock()) > 0:
                await self._sleep(min(remaining, 0.05))
            await self.deliver(event)

    async def drain(self) -> None:
        """Deliver everything queued now (tests without a publisher task)."""
        while not self._queue.empty():
            await self.deliver(self._queue.get_nowait())

    async def deliver(self, event: Event) -> None:
        for socket in self._targets(event):
            await _send(socket, event)

    def _targets(self, event: Event) -> list[Socket]:
        if isinstance(event, Message):
            return self._by_sid(event.sid)
        negotiated = event.sid is not None and self.supports_preview_metadata(event.sid)
        if event.metadata is not None:
            return self._by_sid(event.sid) if negotiated else []
        return [] if negotiated else self._by_sid(event.sid)

    def _by_sid(self, sid: str | None) -> list[Socket]:
        if sid is None:
            return list(self.sockets.values())
        socket = self.sockets.get(sid)
        return [] if socket is None else [socket]

    def supports_preview_metadata(self, sid: str) -> bool:
        flags = self.metadata.get(sid, {}).get("feature_flags", {})
        return isinstance(flags, Mapping) and flags.get("supports_preview_metadata") is True

    def connect(self, client_id: str, socket: Socket) -> str:
        """Register a socket: sid = clientId (replacing an entry) or a fresh uuid4 hex."""
        sid = client_id
        if sid:
            self.sockets.pop(sid, None)
        else:
            sid = uuid.uuid4().hex
        self.sockets[sid] = socket
        self.metadata[sid] = {"feature_flags": {}}
        return sid

    def disconnect(self, sid: str) -> None:
        """The closing socket's cleanup: removes whatever is registered under its sid."""
        self.sockets.pop(sid, None)
        self.metadata.pop(sid, None)

    async def send_now(self, sid: str, message: Message) -> None:
        """Send at once to the socket registered under `sid` (bypasses queue and stall)."""
        for socket in self._by_sid(sid):
            await _send(socket, message)

    async def on_text(self, sid: str, text: str, first: bool) -> bool:
        """Handle a client text frame; returns whether the next one is still "the first"."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            log.warning("Invalid JSON received from client %s: %s", sid, text)
            return first
        try:
            if first and data.get("type") == "feature_flags":
                self.metadata[sid]["feature_flags"] = data.get("data", {})
                await self.send_now(sid, events.feature_flags(self.server_features, sid))
                log.debug("Feature flags negotiated for client %s", sid)
        except Exception as exc:  # ComfyUI logs and keeps reading, "first" unchanged
            log.error("Error processing WebSocket message: %s", exc)
            return first
        return False


async def _send(socket: Socket, event: Event) -> None:
    try:
        if isinstance(event, Message):
            await socket.send_text(event.frame())
        else:
            await socket.send_bytes(event.frame())
    except Exception as exc:  # a socket that went away: ComfyUI logs and goes on
        log.warning("send error: %s", exc)


async def websocket_endpoint(websocket: WebSocket) -> None:
    """`/ws?clientId=` and `/api/ws`: greeting, reconnect frame, then read until closed."""
    emulator = websocket.app.state.emulator
    hub: SocketHub = emulator.hub
    await websocket.accept()
    client_ids = websocket.query_params.getlist("clientId")
    sid = hub.connect(client_ids[0] if client_ids else "", websocket)
    try:
        remaining = emulator.queue.tasks_remaining()
        await hub.send_now(sid, events.status(remaining, sid=sid, greet=True))
        engine = emulator.engine
        if engine.client_id == sid and engine.last_node_id is not None:
            await hub.send_now(sid, events.reconnect_executing(engine.last_node_id, sid))
        await _read(websocket, hub, sid)
    finally:
        hub.disconnect(sid)


async def plain_http_endpoint(request: Request) -> Response:
    """A GET of `/ws` the server did not take as an upgrade: aiohttp's handshake refusal."""
    upgrade = request.headers.get("upgrade")
    if (upgrade or "").lower().strip() != "websocket":
        return text(
            f'No WebSocket UPGRADE hdr: {upgrade}\n Can "Upgrade" only to "WebSocket".', 400
        )
    return text(f"No CONNECTION upgrade hdr: {request.headers.get('connection')}", 400)


async def _read(websocket: WebSocket, hub: SocketHub, sid: str) -> None:
    first = True
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is not None:
            first = await hub.on_text(sid, text, first)
