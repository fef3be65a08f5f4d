"""What a ComfyUI client reads off `/ws`, for benches that time jobs end to end."""

from __future__ import annotations

import json

from websockets.asyncio.client import ClientConnection


async def until_done(ws: ClientConnection, prompt_id: str) -> None:
    """Read frames until ComfyUI's `executing` with node null for `prompt_id`: the job ended
    (previews and other prompts' frames are passed over)."""
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            continue
        event = json.loads(message)
        data = event.get("data") or {}
        ended = event["type"] == "executing" and data.get("node") is None
        if ended and data.get("prompt_id") == prompt_id:
            return
