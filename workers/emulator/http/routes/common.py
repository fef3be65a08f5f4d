"""What every route module shares: the instance, request bodies, query values."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.http.state import Emulator

Endpoint = Callable[[Request], Awaitable[Response]]
RouteTable = list[tuple[str, str, Endpoint]]


def emulator_of(request: Request) -> Emulator:
    emulator: Emulator = request.app.state.emulator
    return emulator


async def read_json(request: Request) -> Any:
    """aiohttp's `request.json()`: the body decoded (charset or utf-8) and parsed, no type check.

    Raises (JSONDecodeError, UnicodeDecodeError) like aiohttp; unhandled, that is a 500.
    """
    body = await request.body()
    charset = request.headers.get("content-type", "").partition("charset=")[2].strip() or "utf-8"
    return json.loads(body.decode(charset))


def query(request: Request) -> dict[str, str]:
    """Query parameters, the first value of each (aiohttp's `rel_url.query[key]`)."""
    values: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        values.setdefault(key, value)
    return values
