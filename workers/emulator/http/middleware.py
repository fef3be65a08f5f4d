"""The ASGI layer in front of the routes, as ComfyUI's aiohttp middlewares behave.

In order: the `refuse=503` fault (ComfyUI routes only; `/emulator/*` always answers); then
either CORS headers (`--enable-cors-header`) or the origin check (loopback `Host` with an
`Origin` naming another host -> 403, empty); `OPTIONS` -> 200 empty; the request body cap
(`--max-upload-size`, 413 when a handler reads past it); and any exception a handler raises
-> aiohttp's plain-text 500 "Server got itself in trouble".
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable
from urllib.parse import urlparse, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workers.emulator.http import responses

log = logging.getLogger(__name__)

CONTROL_PREFIX = "/emulator/"
CORS_HEADERS = {
    "Access-Control-Allow-Methods": "POST, GET, DELETE, PUT, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Allow-Credentials": "true",
}


class BodyTooLarge(Exception):
    def __init__(self, actual_bytes: int) -> None:
        super().__init__(actual_bytes)
        self.actual_bytes = actual_bytes


async def is_loopback(host: str | None) -> bool:
    """ComfyUI's test: an IP literal by its class, a name by every address it resolves to."""
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    loopback = False
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            found = await loop.getaddrinfo(host, None, family=family, type=socket.SOCK_STREAM)
        except socket.gaierror:
            continue
        for *_, address in found:
            if not ipaddress.ip_address(address[0]).is_loopback:
                return loopback
            loopback = True
    return loopback


async def origin_refused(host: str | None, origin: str | None) -> bool:
    """True when ComfyUI's origin-only middleware answers 403."""
    if host is None or origin is None:
        return False
    host_domain: str | None = host.lower()
    parsed = urlparse(origin)
    origin_domain: str | None = parsed.netloc.lower()
    host_parsed = urlsplit("//" + host.lower())
    loopback = await is_loopback(host_parsed.hostname)
    # A side without a port is compared by host name only ("weird browsers").
    if parsed.port is None:
        host_domain = host_parsed.hostname
    if host_parsed.port is None:
        origin_domain = parsed.hostname
    return bool(loopback and host_domain and origin_domain and host_domain != origin_domain)


class ComfyMiddleware:
    """Refusal, origin/CORS, OPTIONS, body cap and the 500 catch-all."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        refusing: Callable[[], str | None],
        max_body_bytes: int | float,
        cors_origin: str | None = None,
    ) -> None:
        self.app = app
        self.refusing = refusing
        self.max_body_bytes = max_body_bytes
        self.cors_origin = cors_origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = await self._refusal(scope)
        if refusal is not None:
            await self._refuse(scope, receive, send, refusal)
        elif scope["type"] == "websocket":
            await self.app(scope, receive, send)
        elif scope["method"] == "OPTIONS":
            await self._cors(responses.empty())(scope, receive, send)
        else:
            await self._http(scope, receive, send)

    async def _refusal(self, scope: Scope) -> Response | None:
        control = scope["path"].startswith(CONTROL_PREFIX)
        if not control and self.refusing() == "503":
            return responses.empty(503)
        if self.cors_origin is not None:
            return None
        headers = Headers(scope=scope)
        try:
            refused = await origin_refused(headers.get("host"), headers.get("origin"))
        except ValueError:  # a malformed port: ComfyUI's middleware raises, aiohttp says 500
            return responses.server_error()
        if refused:
            log.warning("WARNING: request with non matching host and origin, returning 403")
            return responses.empty(403)
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, response: Response) -> None:
        if scope["type"] != "websocket":
            await self._cors(response)(scope, receive, send)
        elif "websocket.http.response" in (scope.get("extensions") or {}):
            start = {"type": "websocket.http.response.start", "status": response.status_code}
            await send({**start, "headers": []})
            await send({"type": "websocket.http.response.body", "body": b""})
        else:  # the server answers the upgrade with 403
            await send({"type": "websocket.close", "code": 1008})

    def _cors(self, response: Response) -> Response:
        if self.cors_origin is not None:
            response.headers["Access-Control-Allow-Origin"] = self.cors_origin
            response.headers.update(CORS_HEADERS)
        return response

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        received = 0

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if self.max_body_bytes and received >= self.max_body_bytes:
                raise BodyTooLarge(received)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if self.cors_origin is not None:
                    headers = MutableHeaders(scope=message)
                    headers["Access-Control-Allow-Origin"] = self.cors_origin
                    headers.update(CORS_HEADERS)
            await send(message)

        try:
            await self.app(scope, capped_receive, tracked_send)
        except Exception as exc:
            if started:
                raise
            await self._failure(exc)(scope, receive, tracked_send)

    def _failure(self, exc: Exception) -> Response:
        if isinstance(exc, BodyTooLarge):
            return responses.too_large(self.max_body_bytes, exc.actual_bytes)
        log.error("Error handling request", exc_info=exc)
        return responses.server_error()
