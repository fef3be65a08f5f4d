"""The gateway's token on every route: HTTP, the WebSocket and the proxied worker routes.

With `auth_token` set, a request is let through only when it carries the token, as
`Authorization: Bearer <token>`, as a `token` query parameter, or as the `comfy_gateway_token`
cookie; the probes (`/healthz`, `/readyz`) stay open. A plain ComfyUI client that cannot set
headers (the web frontend in a browser, a WebSocket library) opens `/?token=<token>` once: a
request authenticated by the query parameter is answered with the cookie, which the browser
then sends on every request and on the WebSocket handshake. The token is taken out of the
query and the cookies before the request goes on, so no route and no worker ever sees it.
Without a token the gateway is as open as ComfyUI itself.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import Unauthorized, error_body

log = logging.getLogger(__name__)

QUERY_PARAM = "token"
COOKIE = "comfy_gateway_token"
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
"""Liveness and readiness probes: an orchestrator calls them without secrets; they show
Redis' and the farm's state, nothing of the workers."""

Headers = list[tuple[bytes, bytes]]


def matches(sent: str | None, token: str) -> bool:
    """Whether `sent` is the token, compared in constant time."""
    return sent is not None and hmac.compare_digest(sent.encode(), token.encode())


def bearer(headers: Headers) -> str | None:
    """The value of an `Authorization: Bearer ...` header, if the request has one."""
    for key, value in headers:
        if key.lower() == b"authorization":
            scheme, _, rest = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return rest.strip()
    return None


def split_query(query: bytes) -> tuple[str | None, bytes]:
    """The `token` parameter of a query string, and the query string without it."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    sent = next((value for key, value in pairs if key == QUERY_PARAM), None)
    if sent is None:
        return None, query
    kept = [(key, value) for key, value in pairs if key != QUERY_PARAM]
    return sent, urlencode(kept).encode("latin-1")


def split_cookies(headers: Headers) -> tuple[str | None, Headers]:
    """The gateway's cookie, and the headers with it removed from every `Cookie` header."""
    sent: str | None = None
    kept: Headers = []
    for key, value in headers:
        if key.lower() != b"cookie":
            kept.append((key, value))
            continue
        found, rest = _without_cookie(value.decode("latin-1"))
        sent = found if found is not None else sent
        if rest:
            kept.append((key, rest.encode("latin-1")))
    return sent, kept


def _without_cookie(header: str) -> tuple[str | None, str]:
    sent: str | None = None
    rest: list[str] = []
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            sent = _unquoted(value)
        elif part.strip():
            rest.append(part.strip())
    return sent, "; ".join(rest)


def _unquoted(value: str) -> str:
    try:
        parsed = SimpleCookie(f"{COOKIE}={value}")
    except CookieError:
        return value
    morsel = parsed.get(COOKIE)
    return morsel.value if morsel is not None else value


def set_cookie(token: str) -> tuple[bytes, bytes]:
    """The cookie that authenticates a browser from now on (never readable by scripts)."""
    cookie = SimpleCookie()
    cookie[COOKIE] = token
    morsel = cookie[COOKIE]
    morsel["path"] = "/"
    morsel["httponly"] = True
    morsel["samesite"] = "Strict"
    return b"set-cookie", morsel.OutputString().encode("latin-1")


class TokenGuard:
    """ASGI middleware: refuses (401, or a refused WebSocket handshake) every request without
    the token, except `OPEN_PATHS`; passes the others on with the token removed from the query
    and the cookies. With `token` None every request passes unchanged."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        by_query, query = split_query(scope.get("query_string", b""))
        by_cookie, headers = split_cookies(list(scope["headers"]))
        inner = {**scope, "query_string": query, "headers": headers}
        sent = (by_query, by_cookie, bearer(headers))
        if any(matches(value, self.token) for value in sent):
            remember = matches(by_query, self.token) and scope["type"] == "http"
            await self.app(inner, receive, _with_cookie(send, self.token) if remember else send)
        elif scope["path"] in OPEN_PATHS:
            await self.app(inner, receive, send)
        else:
            log.info("refused without the token: %s %s", scope["type"], scope["path"])
            await _refuse(scope, send)


def _with_cookie(send: Send, token: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers: Iterable[tuple[bytes, bytes]] = message.get("headers", [])
            message = {**message, "headers": [*headers, set_cookie(token)]}
        await send(message)

    return sending


REFUSAL = (
    "this gateway needs its token: send 'Authorization: Bearer <token>', the 'token' query "
    f"parameter, or the '{COOKIE}' cookie"
)


async def _refuse(scope: Scope, send: Send) -> None:
    if scope["type"] == "websocket":
        # Closing before accepting refuses the handshake (403).
        await send({"type": "websocket.close", "code": 1008})
        return
    refusal = Unauthorized(REFUSAL, kind="unauthorized")
    body = json.dumps(error_body(scope["path"], refusal)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="comfy-gateway"'),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
