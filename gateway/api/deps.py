"""What the routes reach: one object built by the app's lifespan, found on `app.state`."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from gateway.api.browsers import Browsers
from gateway.api.file_roots import FileRoots
from gateway.api.intake import Acceptor
from gateway.api.template_folders import TemplateFolders
from gateway.api.user_store import UserData
from gateway.api.webroot import WebRoot
from gateway.errors import Forbidden, PayloadTooLarge, Unauthorized
from gateway.events.hub import Hub
from gateway.farm.catalog import FarmCatalog
from gateway.farm.node import Farm
from gateway.jobs.store import JobStore
from gateway.ledger.experiments import Experiments
from gateway.peers.client import PeerClient
from gateway.peers.membership import Membership
from gateway.redis_keeper import RedisHealth
from gateway.settings import Settings


@dataclass
class Context:
    settings: Settings
    store: JobStore
    hub: Hub
    farm: Farm
    catalog: FarmCatalog
    acceptor: Acceptor
    membership: Membership
    """This node in the farm, and what it knows of the other nodes."""
    peers: PeerClient
    """Requests to the other nodes."""
    users: UserData
    """The web frontend's user data (settings, workflows), one store for the farm."""
    browsers: Browsers
    """The client ids each browser opened, for clearing its own items."""
    redis_health: Callable[[], RedisHealth] | None = None
    """The embedded Redis' supervision (None: Redis is given by URL, not ours to restart)."""
    file_roots: FileRoots = field(default_factory=FileRoots)
    """The folders `/view` checks real paths against."""
    experiments: Experiments | None = None
    """The farm's A/B experiments (`gateway.ledger.experiments`)."""
    web_root: WebRoot | None = None
    """The web frontend served at `/` (None: none installed or configured)."""
    templates: TemplateFolders = field(default_factory=lambda: TemplateFolders(()))
    """The workflow template packages installed beside the gateway (none: a worker's)."""


def get_context(connection: HTTPConnection) -> Context:
    context: Context = connection.app.state.context
    return context


Ctx = Annotated[Context, Depends(get_context)]

AUTH_HINT = (
    "set an auth token (COMFY_GATEWAY_AUTH_TOKEN, or auth_token in the config file) and send "
    "it as 'Authorization: Bearer <token>'"
)


def is_operator(context: Context, request: Request) -> bool:
    """Whether the request carries the gateway's token as a bearer header (operator actions
    take it from there only, never from the cookie a browser sends by itself)."""
    token = context.settings.auth_token
    if not token:
        return False
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)


def require_token(context: Context, request: Request, what: str) -> None:
    """Operator actions need the bearer token; without one configured they are disabled."""
    if not context.settings.auth_token:
        raise Forbidden(
            f"{what} is disabled on this gateway; to enable it, {AUTH_HINT}", kind="forbidden"
        )
    if not is_operator(context, request):
        raise Unauthorized(f"{what} needs the gateway's bearer token", kind="unauthorized")


async def read_body(request: Request, limit_bytes: int, setting: str | None = None) -> bytes:
    """The request body, refused with 413 past `limit_bytes` (declared or actual), before
    more than the limit is read; the message names the `setting` that sets the limit."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
        raise _too_large(limit_bytes, setting)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise _too_large(limit_bytes, setting)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit_bytes: int, setting: str | None) -> PayloadTooLarge:
    where = f" (the gateway's {setting} setting)" if setting else ""
    return PayloadTooLarge(
        f"body larger than the limit of {limit_bytes} bytes{where}", kind="payload_too_large"
    )
