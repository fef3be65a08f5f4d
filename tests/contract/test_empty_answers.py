"""Answers without a body carry no Content-Type (aiohttp's bare `web.Response(status=...)`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest


def _bare(response: httpx.Response, status: int) -> None:
    assert response.status_code == status
    assert response.content == b""
    assert "content-type" not in response.headers


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/queue", {}),
        ("/history", {}),
        ("/interrupt", {"prompt_id": "not-running"}),
        ("/free", {}),
    ],
)
async def test_posts_that_change_state_answer_a_bare_200(
    http: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    for prefix in ("", "/api"):
        _bare(await http.post(prefix + path, json=body), 200)


async def test_options_answers_a_bare_200(http: httpx.AsyncClient) -> None:
    for path in ("/prompt", "/nonexistent"):
        _bare(await http.options(path), 200)


async def test_a_foreign_origin_on_a_loopback_host_gets_a_bare_403(
    http: httpx.AsyncClient,
) -> None:
    _bare(await http.get("/prompt", headers={"Origin": "http://127.0.0.1:1"}), 403)


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/view", {}, 404),
        ("/view", {"filename": "no_such_file_00001_.png"}, 404),
        ("/view", {"filename": ""}, 400),
        ("/view", {"filename": "x.png", "subfolder": ".."}, 403),
        ("/view_metadata/checkpoints", {}, 404),
        ("/view_metadata/checkpoints", {"filename": "no_such.safetensors"}, 404),
        ("/models/no_such_folder", {}, 404),
    ],
)
async def test_file_refusals_are_bare(
    http: httpx.AsyncClient, path: str, params: dict[str, str], status: int
) -> None:
    _bare(await http.get(path, params=params), status)
