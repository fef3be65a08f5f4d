"""GET /view of an output: bytes, headers, conversions and the path checks (PROTOCOL.md 1.4)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.contract import api, graphs, images
from tests.contract.graphs import SAVE


@pytest.fixture
async def output(http: httpx.AsyncClient, checkpoints: list[str], prefix: str) -> dict[str, Any]:
    """The UI entry ({filename, subfolder, type}) of a freshly saved 64x64 output."""
    entry = await api.run(http, graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()))
    [image] = api.images(entry, SAVE)
    return image


@pytest.mark.parametrize("path", ["/view", "/api/view"])
async def test_view_serves_the_saved_png_with_its_name(
    http: httpx.AsyncClient, output: dict[str, Any], path: str
) -> None:
    response = await http.get(path, params=output)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.headers["content-disposition"] == f'filename="{output["filename"]}"'
    assert response.content.startswith(images.PNG_SIGNATURE)
    assert images.decode(response.content).size == (64, 64)


async def test_view_defaults_to_the_output_folder(
    http: httpx.AsyncClient, output: dict[str, Any]
) -> None:
    response = await http.get("/view", params={"filename": output["filename"]})
    assert response.status_code == 200
    assert response.content.startswith(images.PNG_SIGNATURE)


async def test_an_annotation_in_the_name_chooses_the_folder(
    http: httpx.AsyncClient, output: dict[str, Any]
) -> None:
    params = {"filename": f"{output['filename']} [output]", "type": "input"}
    response = await http.get("/view", params=params)
    assert response.status_code == 200
    assert response.headers["content-disposition"] == f'filename="{output["filename"]}"'


async def test_the_png_carries_the_prompt_as_a_text_chunk(
    http: httpx.AsyncClient, output: dict[str, Any]
) -> None:
    image = images.decode((await http.get("/view", params=output)).content)
    assert "prompt" in image.info


@pytest.mark.parametrize(
    ("extra", "content_type", "mode"),
    [
        ({"preview": "jpeg;80"}, "image/jpeg", "RGB"),
        ({"preview": "webp;50"}, "image/webp", None),
        ({"channel": "rgb"}, "image/png", "RGB"),
        ({"channel": "a"}, "image/png", "RGBA"),
    ],
    ids=["jpeg", "webp", "rgb", "alpha"],
)
async def test_view_converts_on_request(
    http: httpx.AsyncClient,
    output: dict[str, Any],
    extra: dict[str, str],
    content_type: str,
    mode: str | None,
) -> None:
    response = await http.get("/view", params={**output, **extra})
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    image = images.decode(response.content)
    assert image.size == (64, 64)
    if mode is not None:
        assert image.mode == mode


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({}, 404),
        ({"filename": "no_such_file_00001_.png"}, 404),
        ({"filename": ""}, 400),
        ({"filename": "../secret.png"}, 400),
        ({"filename": "/etc/passwd"}, 400),
        ({"filename": "x.png", "type": "elsewhere"}, 400),
        ({"filename": "x.png", "subfolder": ".."}, 403),
        ({"filename": "x.png", "subfolder": "../.."}, 403),
    ],
    ids=[
        "no-filename",
        "missing-file",
        "empty-name",
        "dot-dot",
        "absolute",
        "unknown-type",
        "subfolder-escape",
        "subfolder-escape-deeper",
    ],
)
async def test_view_refuses_bad_or_missing_paths(
    http: httpx.AsyncClient, params: dict[str, str], status: int
) -> None:
    response = await http.get("/view", params=params)
    assert response.status_code == status


async def test_view_answers_304_to_its_own_validators(
    http: httpx.AsyncClient, output: dict[str, Any]
) -> None:
    first = await http.get("/view", params=output)
    etag, last_modified = first.headers["etag"], first.headers["last-modified"]
    for headers in ({"If-None-Match": etag}, {"If-Modified-Since": last_modified}):
        again = await http.get("/view", params=output, headers=headers)
        assert (again.status_code, again.content) == (304, b""), headers
        assert (again.headers["etag"], again.headers["last-modified"]) == (etag, last_modified)
        assert again.headers["content-type"] == "image/png"
    other = await http.get("/view", params=output, headers={"If-None-Match": '"other"'})
    assert (other.status_code, other.content) == (200, first.content)


async def test_view_refuses_a_failed_precondition_with_412(
    http: httpx.AsyncClient, output: dict[str, Any]
) -> None:
    response = await http.get("/view", params=output, headers={"If-Match": '"other"'})
    assert (response.status_code, response.content) == (412, b"")


@pytest.mark.parametrize(
    ("range_header", "status"),
    [("bytes=0-7", 206), ("bytes=-8", 206), ("bytes=0-1,4-5", 416), ("bytes=99999999-", 416)],
)
async def test_view_serves_one_byte_range(
    http: httpx.AsyncClient, output: dict[str, Any], range_header: str, status: int
) -> None:
    whole = (await http.get("/view", params=output)).content
    response = await http.get("/view", params=output, headers={"Range": range_header})
    assert response.status_code == status
    size = len(whole)
    if status == 206:
        start = 0 if range_header == "bytes=0-7" else size - 8
        assert response.content == whole[start : start + 8]
        assert response.headers["content-range"] == f"bytes {start}-{start + 7}/{size}"
    else:
        assert response.headers["content-range"] == f"bytes */{size}"
