"""What no route takes: the web root, unknown paths, trailing slashes, wrong methods, `/ws`
without an upgrade (PROTOCOL.md 1). ComfyUI serves its frontend directory as a static root
after every API route, so an unknown GET is a missing file there."""

from __future__ import annotations

import httpx
import pytest

from tests.contract import api

OCTET = "application/octet-stream"
NOT_FOUND = "404: Not Found"


def _missing_file(response: httpx.Response) -> None:
    assert response.status_code == 404
    assert response.content == b""
    assert response.headers["content-type"] == OCTET


@pytest.mark.parametrize("path", ["/", "/api/"])
async def test_the_root_without_a_frontend_is_a_missing_index(
    http: httpx.AsyncClient, target: str, path: str
) -> None:
    response = await http.get(path)
    if target == "gateway" and path == "/":
        # The gateway serves the web frontend itself (tests/integration/test_webui.py).
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        return
    _missing_file(response)
    assert response.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    "path",
    [
        "/nonexistent",
        "/api/nonexistent",
        "/api/internal/logs",
        "/object_info/",
        "/api/object_info/",
        "/models/checkpoints/",
        "/prompt/",
        "/interrupt",
    ],
)
async def test_an_unknown_get_is_a_missing_file_and_never_a_redirect(
    http: httpx.AsyncClient, path: str
) -> None:
    response = await http.get(path)
    _missing_file(response)
    assert "cache-control" not in response.headers
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("suffix", "cache_control"),
    [(".js", "no-cache"), (".css", "no-cache"), (".png", "public, max-age=86400")],
)
async def test_missing_static_files_carry_the_cache_headers_of_their_type(
    http: httpx.AsyncClient, suffix: str, cache_control: str
) -> None:
    response = await http.get(f"/{api.unique('missing')}{suffix}")
    _missing_file(response)
    assert response.headers["cache-control"] == cache_control


@pytest.mark.parametrize("path", ["/internal", "/internal/", "/internal/nonexistent"])
async def test_unknown_internal_paths_are_a_plain_404(http: httpx.AsyncClient, path: str) -> None:
    response = await http.get(path)
    assert (response.status_code, response.text) == (404, NOT_FOUND)
    assert response.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/prompt", "GET,HEAD,POST"),
        ("PUT", "/api/queue", "GET,HEAD,POST"),
        ("DELETE", "/interrupt", "GET,HEAD,POST"),
        ("POST", "/nonexistent", "GET,HEAD"),
        ("POST", "/", "GET,HEAD"),
        ("POST", "/internal/logs", "GET,HEAD"),
    ],
)
async def test_a_method_no_route_takes_is_405_with_the_allowed_ones(
    http: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await http.request(method, path)
    assert (response.status_code, response.text) == (405, "405: Method Not Allowed")
    assert response.headers["allow"] == allow


@pytest.mark.parametrize("path", ["/ws", "/api/ws"])
async def test_ws_without_an_upgrade_header_is_refused_with_400(
    http: httpx.AsyncClient, path: str
) -> None:
    response = await http.get(path)
    assert response.status_code == 400
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == 'No WebSocket UPGRADE hdr: None\n Can "Upgrade" only to "WebSocket".'
