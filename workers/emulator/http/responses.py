"""Response bodies and headers as aiohttp (ComfyUI's server) writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.responses import Response

SERVER_ERROR_TEXT = "500 Internal Server Error\n\nServer got itself in trouble"
JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
OCTET_TYPE = "application/octet-stream"


def json_response(body: Any, status: int = 200) -> Response:
    """aiohttp's json_response: `json.dumps` with default separators, utf-8 JSON type."""
    return Response(json.dumps(body), status_code=status, media_type=JSON_TYPE)


def empty(status: int = 200) -> Response:
    """aiohttp's bare `web.Response(status=...)`: no body and no Content-Type at all."""
    return Response(b"", status_code=status)


def missing_file(headers: Mapping[str, str] | None = None) -> Response:
    """What aiohttp's FileResponse answers for a file that is not there: 404, no body, but the
    octet-stream type every stream response carries."""
    return Response(b"", status_code=404, media_type=OCTET_TYPE, headers=headers)


def text(body: str, status: int, headers: Mapping[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type=TEXT_TYPE, headers=headers)


def server_error() -> Response:
    """What aiohttp answers when a handler raises."""
    return text(SERVER_ERROR_TEXT, 500)


def not_found() -> Response:
    """aiohttp's HTTPNotFound, raised when no resource claims the path."""
    return text("404: Not Found", 404)


def forbidden() -> Response:
    return text("403: Forbidden", 403)


def method_not_allowed(allowed: Iterable[str]) -> Response:
    """aiohttp's HTTPMethodNotAllowed: the methods sorted and comma-joined, no spaces."""
    return text("405: Method Not Allowed", 405, {"Allow": ",".join(sorted(allowed))})


def too_large(max_bytes: int | float, actual_bytes: int) -> Response:
    return text(
        f"Maximum request body size {max_bytes} exceeded, actual body size {actual_bytes}", 413
    )
