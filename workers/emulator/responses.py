"""Response bodies and headers as aiohttp (ComfyUI's server) writes them."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

SERVER_ERROR_TEXT = "500 Internal Server Error\n\nServer got itself in trouble"
JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


def json_response(body: Any, status: int = 200) -> Response:
    """aiohttp's json_response: `json.dumps` with default separators, utf-8 JSON type."""
    return Response(json.dumps(body), status_code=status, media_type=JSON_TYPE)


def empty(status: int = 200) -> Response:
    """aiohttp's bare `web.Response(status=...)`: no body, octet-stream type."""
    return Response(b"", status_code=status, media_type="application/octet-stream")


def text(body: str, status: int) -> Response:
    return Response(body, status_code=status, media_type=TEXT_TYPE)


def server_error() -> Response:
    """What aiohttp answers when a handler raises."""
    return text(SERVER_ERROR_TEXT, 500)


def not_found() -> Response:
    return text("404: Not Found", 404)


def method_not_allowed() -> Response:
    return text("405: Method Not Allowed", 405)


def too_large(max_bytes: int | float, actual_bytes: int) -> Response:
    return text(
        f"Maximum request body size {max_bytes} exceeded, actual body size {actual_bytes}", 413
    )
