"""Which client ids belong to one browser, so that the web UI can clear its own queue items.

The web frontend sends no client id with `POST /queue {"clear": true}` nor with `POST
/history {"clear": true}`; its client id is the `clientId` of its WebSocket. The gateway gives
each browser a random id in a cookie (with the page, `GET /`) and, when that browser opens
`/ws?clientId=...`, remembers the client id under the browser's id in Redis, so any gateway
node knows it. A clear then removes the items of those client ids only.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable

import redis.asyncio as aioredis

from gateway.jobs.keys import Keys

COOKIE = "comfy_gateway_browser"
ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
MAX_CLIENTS = 256
"""Client ids kept per browser, the latest (a tab opens one per page load)."""


def new_browser_id() -> str:
    return secrets.token_urlsafe(18)


def valid_browser_id(value: str | None) -> str | None:
    """The cookie's value when it is one the gateway could have issued."""
    return value if value is not None and ID_RE.match(value) else None


class Browsers:
    """The client ids of each browser, kept as long as its jobs (`job_ttl_s`)."""

    def __init__(self, redis: aioredis.Redis, keys: Keys, ttl_s: float, now_ms: Callable[[], int]):
        self.redis = redis
        self.keys = keys
        self.ttl_s = ttl_s
        self.now_ms = now_ms

    async def remember(self, browser: str, client_id: str) -> None:
        key = self.keys.browser_clients(browser)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(key, {client_id: self.now_ms()})
            pipe.zremrangebyrank(key, 0, -MAX_CLIENTS - 1)
            pipe.expire(key, int(self.ttl_s))
            await pipe.execute()

    async def client_ids(self, browser: str) -> set[str]:
        members = await self.redis.zrange(self.keys.browser_clients(browser), 0, -1)
        return {str(member) for member in members}
