"""What no route takes: the empty web root, 404 and 405 as aiohttp answers them, no redirects."""

from __future__ import annotations

import httpx
import pytest

from workers.emulator.http.routes.webroot import cache_headers, static

pytestmark = pytest.mark.timeout(30)

OCTET = "application/octet-stream"
TEXT = "text/plain; charset=utf-8"


@pytest.mark.parametrize("path", ["/", "/api/"])
async def test_the_root_is_a_missing_index_with_no_cache_headers(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert (response.status_code, response.content) == (404, b"")
    assert response.headers["content-type"] == OCTET
    assert response.headers["cache-control"] == "no-cache"
    assert (response.headers["pragma"], response.headers["expires"]) == ("no-cache", "0")


@pytest.mark.parametrize(
    "path",
    ["/nope", "/api/internal/logs", "/object_info/", "/api/prompt/", "/interrupt", "/a/b/c"],
)
async def test_other_paths_are_missing_files_of_the_static_root(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert (response.status_code, response.content) == (404, b"")
    assert response.headers["content-type"] == OCTET
    assert "cache-control" not in response.headers


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a.js", "no-cache"),
        ("/b/c.css", "no-cache"),
        ("/index.en.json", "no-cache"),
        ("/x.PNG", "public, max-age=86400"),
        ("/x.webp", "public, max-age=86400"),
        ("/x.json", None),
        ("/x", None),
    ],
)
def test_cache_headers_follow_comfyuis_middleware(path: str, expected: str | None) -> None:
    assert cache_headers(path).get("Cache-Control") == expected


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("//prompt", 404, "404: Not Found"),
        ("/../etc/passwd", 404, "404: Not Found"),
        ("/a/../../x", 404, "404: Not Found"),
        ("/.", 403, "403: Forbidden"),
        ("/a/..", 403, "403: Forbidden"),
        ("/a/../b", 404, ""),
    ],
)
def test_paths_leaving_the_root_get_aiohttps_plain_answers(
    path: str, status: int, text: str
) -> None:
    response = static(path)
    assert (response.status_code, bytes(response.body).decode()) == (status, text)


@pytest.mark.parametrize("path", ["/internal", "/internal/", "/internal/nope"])
async def test_the_internal_subapp_has_no_static_fallback(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert (response.status_code, response.text) == (404, "404: Not Found")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/prompt", "GET,HEAD,POST"),
        ("DELETE", "/api/interrupt", "GET,HEAD,POST"),
        ("POST", "/nope", "GET,HEAD"),
        ("PUT", "/", "GET,HEAD"),
        ("POST", "/internal/logs", "GET,HEAD"),
    ],
)
async def test_other_methods_get_405_with_every_allowed_one(
    client: httpx.AsyncClient, method: str, path: str, allow: str
) -> None:
    response = await client.request(method, path)
    assert (response.status_code, response.text) == (405, "405: Method Not Allowed")
    assert response.headers["allow"] == allow


async def test_ws_without_an_upgrade_is_aiohttps_handshake_refusal(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/ws", "/api/ws"):
        response = await client.get(path)
        assert response.status_code == 400
        assert (
            response.text == 'No WebSocket UPGRADE hdr: None\n Can "Upgrade" only to "WebSocket".'
        )
    headers = {"Upgrade": "websocket", "Connection": "close"}
    upgrade_only = await client.get("/ws", headers=headers)
    assert (upgrade_only.status_code, upgrade_only.text) == (
        400,
        "No CONNECTION upgrade hdr: close",
    )
