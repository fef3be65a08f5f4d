"""WS /ws?clientId=: every event of this client's prompts, whichever worker runs them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from gateway import tasks
from gateway.api.browsers import COOKIE as BROWSER_COOKIE
from gateway.api.browsers import valid_browser_id
from gateway.api.deps import Context, get_context
from gateway.events.frames import status_message
from gateway.events.hub import ClientSocket
from workers.comfy.messages import EventKind

router = APIRouter()


@router.websocket("/ws")
async def websocket_events(websocket: WebSocket) -> None:
    ctx = get_context(websocket)
    sid = websocket.query_params.get("clientId") or uuid.uuid4().hex
    await websocket.accept()
    socket = ClientSocket(sid)
    # Registered before anything is sent, so no event published from now on is missed; a
    # second socket with the same id is a separate entry, and closing either leaves the other.
    ctx.hub.attach(socket)
    try:
        browser = valid_browser_id(websocket.cookies.get(BROWSER_COOKIE))
        if browser is not None:
            await ctx.browsers.remember(browser, sid)
        first = status_message(await ctx.store.queue_remaining(), sid)
        writer = asyncio.create_task(_write(websocket, socket, first))
        reader = asyncio.create_task(_read(websocket, socket, ctx))
        _, pending = await asyncio.wait({writer, reader}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    finally:
        ctx.hub.detach(socket)
        with contextlib.suppress(Exception):
            await websocket.close()


async def _write(websocket: WebSocket, socket: ClientSocket, first: str) -> None:
    # A backlog (thousands of progress frames) is sent without a suspension while the socket
    # takes it: turns keep the rest of the gateway served meanwhile.
    turns = tasks.Turns()
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await websocket.send_text(first)
        while True:
            item = await socket.queue.get()
            if item is None:
                return
            if isinstance(item, bytes):
                await websocket.send_bytes(item)
            else:
                await websocket.send_text(item)
            await turns.take()


async def _read(websocket: WebSocket, socket: ClientSocket, ctx: Context) -> None:
    """Only the first text frame matters (feature_flags), as in ComfyUI; the rest is drained."""
    first = True
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if first and text is not None:
                first = False
                _negotiate(text, socket, ctx)


def _negotiate(text: str, socket: ClientSocket, ctx: Context) -> None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    if not isinstance(data, dict) or data.get("type") != EventKind.FEATURE_FLAGS:
        return
    flags = data.get("data")
    flags = flags if isinstance(flags, dict) else {}
    socket.previews_with_metadata = bool(flags.get("supports_preview_metadata"))
    ours = {"supports_preview_metadata": True, "max_upload_size": ctx.settings.max_body_bytes}
    socket.offer(json.dumps({"type": EventKind.FEATURE_FLAGS.value, "data": ours}))
