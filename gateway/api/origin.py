"""ComfyUI's guard against cross-site requests to a server on loopback, and its OPTIONS answer.

A page on another site can make a browser send requests to 127.0.0.1:8188. When the `Host` a
request names is a loopback address and its `Origin` names another host (or port), ComfyUI
answers a bare 403; so does the gateway, for HTTP and for the WebSocket handshake. Every
OPTIONS request gets a bare 200, as from ComfyUI's middleware.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from urllib.parse import urlparse, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=64)
def is_loopback(host: str | None) -> bool:
    """ComfyUI's test: an IP on loopback, or a name all of whose addresses are."""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def cross_origin(host: str | None, origin: str | None) -> bool:
    """True when ComfyUI would refuse the request: loopback `Host`, another `Origin`."""
    if not host or not origin:
        return False
    host = host.lower()
    parsed = urlparse(origin)
    host_part = urlsplit("//" + host)
    origin_part = parsed.netloc.lower()
    if parsed.port is None:  # a port only on one side must not count as a difference
        host, origin_part = host_part.hostname or "", parsed.hostname or ""
    if not (is_loopback(host_part.hostname) and host and origin_part):
        return False
    return host != origin_part


class OriginGuard:
    """ASGI middleware: refuses cross-origin requests to a loopback host; answers OPTIONS."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if cross_origin(headers.get("host"), headers.get("origin")):
            log.warning("refused: host %s, origin %s", headers.get("host"), headers.get("origin"))
            await _bare(scope, send, 403)
        elif scope["type"] == "http" and scope["method"] == "OPTIONS":
            await _bare(scope, send, 200)
        else:
            await self.app(scope, receive, send)


async def _bare(scope: Scope, send: Send, status: int) -> None:
    if scope["type"] == "websocket":
        # Closing before accepting refuses the handshake (403).
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]}
    )
    await send({"type": "http.response.body", "body": b""})
