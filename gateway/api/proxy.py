"""What no gateway route takes, and no file of the gateway's web root answers, goes to one
worker, unchanged: custom nodes' routes and scripts, `/internal/*`, and ComfyUI's own answers
to unknown paths and methods (404, 405 with `Allow`).

The worker is the first ready one in configuration order. The browser's `Origin` and the
gateway's bearer token are not forwarded: the gateway checks the origin itself (a worker
bound to loopback would refuse the gateway's own), and the token is the gateway's secret.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from urllib.parse import quote

import httpx
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from gateway.api.deps import Context, Ctx, read_body
from gateway.api.frontend import static_file
from gateway.errors import Unavailable, UriTooLong
from workers.client import WorkerError

router = APIRouter()

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
# Hop-by-hop headers, and what the gateway keeps for itself.
NOT_FORWARDED = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "authorization",
        "origin",
        "content-length",
    }
)
NOT_RETURNED = frozenset({"connection", "keep-alive", "transfer-encoding", "date", "server"})
MAX_URL_BYTES = 8190
"""ComfyUI's server (aiohttp) refuses a request line longer than this; httpx cannot even
build a URL much longer (64 KiB)."""


@router.api_route("/{path:path}", methods=METHODS, include_in_schema=False)
async def forward(path: str, request: Request, ctx: Ctx) -> Response:
    size = len(request.url.path) + len(request.url.query)
    if size > MAX_URL_BYTES:
        raise UriTooLong(
            f"URL of {size} bytes is longer than the {MAX_URL_BYTES} a worker accepts",
            kind="uri_too_long",
        )
    served = static_file(ctx.web_root, request)
    if served is not None:
        return served
    upstream, stack = await open_upstream(request, ctx)
    return streamed(upstream, stack)


async def open_upstream(request: Request, ctx: Context) -> tuple[httpx.Response, AsyncExitStack]:
    """The request sent on to the first ready worker: its answer, headers read, body not yet;
    closing the stack ends it. Raises Unavailable when no worker is ready or it fails."""
    link = ctx.farm.any_ready()
    if link is None:
        raise Unavailable("no worker is ready", kind="not_ready")
    body = await read_body(request, ctx.settings.max_body_bytes)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in NOT_FORWARDED}
    stack = AsyncExitStack()
    try:
        upstream = await stack.enter_async_context(
            link.client.stream(
                request.method,
                _raw_path(request),
                params=request.url.query,
                headers=headers,
                content=body or None,
            )
        )
    except WorkerError as exc:
        await stack.aclose()
        raise Unavailable(
            f"worker {link.name} unavailable: {exc}", kind="worker_unavailable"
        ) from None
    return upstream, stack


def streamed(upstream: httpx.Response, stack: AsyncExitStack) -> StreamingResponse:
    """The worker's answer as the client's, streamed; the stack closes when it is sent."""
    kept = {k: v for k, v in upstream.headers.items() if k.lower() not in NOT_RETURNED}
    return StreamingResponse(_raw(upstream, stack), status_code=upstream.status_code, headers=kept)


def _raw_path(request: Request) -> str:
    """The path as the client sent it, percent-escapes kept (the decoded one may hold
    characters no URL can carry)."""
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) and raw else quote(request.url.path)


async def _raw(upstream: httpx.Response, stack: AsyncExitStack) -> AsyncIterator[bytes]:
    async with stack:
        async for chunk in upstream.aiter_raw():
            yield chunk
