"""The dashboard: `GET /gateway/` (one static page), its script and style, its data as one
JSON snapshot (`/gateway/dashboard.json`) and live, as server-sent events (`/gateway/events`).

Read-only, so as open as `/gateway/workers`: with an `auth_token` the token guard asks for the
token on all of them (a browser opens `/gateway/?token=...` once and then has the cookie).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from importlib import resources

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from gateway.api.dashboard_view import snapshot
from gateway.api.deps import Context, Ctx

router = APIRouter()

EVENT_INTERVAL_S = 1.0
STREAM_S = 60.0
"""A stream ends after this long and the browser opens a new one (so none outlives a stop)."""
STATIC = {
    "dashboard.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}


def _static(name: str) -> Response:
    body = resources.files("gateway.static").joinpath(name).read_bytes()
    return Response(body, media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


@router.get("/gateway/")
async def page() -> Response:
    return _static("dashboard.html")


@router.get("/gateway/dashboard.js")
async def script() -> Response:
    return _static("dashboard.js")


@router.get("/gateway/dashboard.css")
async def style() -> Response:
    return _static("dashboard.css")


@router.get("/gateway/dashboard.json")
async def dashboard_json(ctx: Ctx) -> Response:
    return JSONResponse(await snapshot(ctx.farm, ctx.store))


@router.get("/gateway/events")
async def events(request: Request, ctx: Ctx) -> Response:
    """A snapshot every `EVENT_INTERVAL_S` as `data:` lines, until the page goes, the gateway
    drains, or `STREAM_S` passed (the browser's EventSource reconnects)."""
    return StreamingResponse(
        _snapshots(request, ctx),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _snapshots(request: Request, ctx: Context) -> AsyncIterator[str]:
    yield "retry: 2000\n\n"
    deadline_s = asyncio.get_running_loop().time() + STREAM_S
    while asyncio.get_running_loop().time() < deadline_s and not ctx.farm.draining:
        if await request.is_disconnected():
            return
        yield f"data: {json.dumps(await snapshot(ctx.farm, ctx.store))}\n\n"
        await asyncio.sleep(EVENT_INTERVAL_S)
