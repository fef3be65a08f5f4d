"""/view and the upload routes in process (PROTOCOL.md 1.4-1.5)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from tests.unit.workers.emulator.conftest import run_to_history
from workers.emulator.http.state import Emulator

pytestmark = pytest.mark.timeout(30)


def png(color: Any, size: tuple[int, int] = (8, 6), mode: str = "RGB", **text: str) -> bytes:
    info = PngInfo()
    for key, value in text.items():
        info.add_text(key, value)
    buffer = io.BytesIO()
    Image.new(mode, size, color).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


async def upload(
    client: httpx.AsyncClient,
    data: bytes,
    name: str = "red.png",
    route: str = "/upload/image",
    **fields: str,
) -> httpx.Response:
    return await client.post(route, files={"image": (name, data, "image/png")}, data=fields)


async def test_upload_answers_name_subfolder_type(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    response = await upload(client, png((255, 0, 0)))
    assert response.json() == {"name": "red.png", "subfolder": "", "type": "input"}
    assert (Path(emulator.dirs.input) / "red.png").read_bytes() == png((255, 0, 0))


async def test_same_name_uploads_reuse_or_number_the_file(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    names = []
    for color in [(255, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 255), (0, 255, 0)]:
        names.append((await upload(client, png(color))).json()["name"])
    assert names == ["red.png", "red.png", "red (1).png", "red (2).png", "red (1).png"]
    assert sorted(os.listdir(emulator.dirs.input)) == [
        "red (1).png",
        "red (2).png",
        "red.png",
    ]


async def test_overwrite_replaces_the_file(client: httpx.AsyncClient, emulator: Emulator) -> None:
    await upload(client, png((255, 0, 0)))
    response = await upload(client, png((0, 0, 255)), overwrite="true")
    assert response.json()["name"] == "red.png"
    assert (Path(emulator.dirs.input) / "red.png").read_bytes() == png((0, 0, 255))


async def test_subfolders_types_and_refusals(client: httpx.AsyncClient, emulator: Emulator) -> None:
    nested = await upload(client, png((1, 2, 3)), subfolder="a/b", type="temp")
    assert nested.json() == {"name": "red.png", "subfolder": "a/b", "type": "temp"}
    assert (Path(emulator.dirs.temp) / "a" / "b" / "red.png").is_file()
    assert (await upload(client, png((1, 2, 3)), subfolder="../../x")).status_code == 400
    assert (await upload(client, png((1, 2, 3)), type="elsewhere")).status_code == 500
    no_file = await client.post("/upload/image", data={"type": "input"})
    assert (no_file.status_code, no_file.content) == (400, b"")


async def test_an_uploaded_image_is_listed_and_loadable(client: httpx.AsyncClient) -> None:
    await upload(client, png((9, 9, 9), size=(40, 24)), name="pic.png")
    await upload(client, png((9, 9, 9)), name="pic.png", subfolder="deep")
    listed = (await client.get("/object_info/LoadImage")).json()
    assert listed["LoadImage"]["input"]["required"]["image"][0] == ["pic.png"]
    prompt: dict[str, Any] = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "pic.png"}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "inv"}},
    }
    entry = await run_to_history(client, {"prompt": prompt})
    image = entry["outputs"]["3"]["images"][0]
    view = await client.get("/view", params=image)
    assert Image.open(io.BytesIO(view.content)).size == (40, 24)
    prompt["1"]["inputs"]["image"] = "deep/pic.png"
    assert (await client.post("/prompt", json={"prompt": prompt})).status_code == 200


async def test_load_image_of_a_missing_file_fails_validation(client: httpx.AsyncClient) -> None:
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "nope.png"}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
    }
    response = await client.post("/prompt", json={"prompt": prompt})
    assert response.status_code == 400
    error = response.json()["node_errors"]["1"]["errors"][0]
    assert (error["type"], error["details"]) == (
        "custom_validation_failed",
        "image - Invalid image file: nope.png",
    )


async def test_mask_upload_replaces_the_alpha_and_keeps_text(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    original = png((200, 100, 50, 255), mode="RGBA", workflow="{}")
    await upload(client, original, name="orig.png", type="output")
    mask = png((0, 0, 0, 7), mode="RGBA")
    ref = json.dumps({"filename": "orig.png", "type": "output", "subfolder": ""})
    response = await upload(client, mask, name="masked.png", route="/upload/mask", original_ref=ref)
    assert response.json() == {"name": "masked.png", "subfolder": "", "type": "input"}
    with Image.open(Path(emulator.dirs.input) / "masked.png") as result:
        assert result.getpixel((0, 0)) == (200, 100, 50, 7)
        assert result.text == {"workflow": "{}"}  # type: ignore[attr-defined]


async def test_mask_with_an_unresolvable_original_answers_but_writes_nothing(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    ref = json.dumps({"filename": "../x.png"})
    response = await upload(
        client, png((0, 0, 0)), name="m.png", route="/upload/mask", original_ref=ref
    )
    assert response.json()["name"] == "m.png"
    assert not (Path(emulator.dirs.input) / "m.png").exists()


async def saved(client: httpx.AsyncClient) -> dict[str, str]:
    prompt = {
        "1": {
            "class_type": "EmptyImage",
            "inputs": {"width": 16, "height": 8, "batch_size": 1, "color": 0x102030},
        },
        "2": {
            "class_type": "SaveImage",
            "inputs": {"images": ["1", 0], "filename_prefix": "sub/pic"},
        },
    }
    entry = await run_to_history(client, {"prompt": prompt})
    image: dict[str, str] = entry["outputs"]["2"]["images"][0]
    return image


async def test_view_checks_paths_in_comfyui_order(client: httpx.AsyncClient) -> None:
    image = await saved(client)
    assert image == {"filename": "pic_00001_.png", "subfolder": "sub", "type": "output"}
    cases = [
        ({}, 404),
        ({"filename": ""}, 400),
        ({"filename": "/etc/passwd"}, 400),
        ({"filename": "a/../b.png"}, 400),
        ({"filename": "pic_00001_.png", "type": "nope"}, 400),
        ({"filename": "pic_00001_.png", "subfolder": ".."}, 403),
        ({"filename": "pic_00001_.png"}, 404),
        ({"filename": "pic_00001_.png", "subfolder": "sub"}, 200),
        ({"filename": "pic_00001_.png [output]", "subfolder": "sub", "type": "temp"}, 200),
        ({"filename": "pic_00001_.png [input]", "subfolder": "sub"}, 404),
    ]
    for params, status in cases:
        response = await client.get("/view", params=params)
        assert response.status_code == status, params


async def test_view_previews_and_channels(client: httpx.AsyncClient) -> None:
    image = await saved(client)
    webp = await client.get("/view", params={**image, "preview": "webp;50"})
    assert webp.headers["content-type"] == "image/webp"
    assert webp.headers["content-disposition"] == 'filename="pic_00001_.png"'
    jpeg = await client.get("/view", params={**image, "preview": "jpeg;80"})
    assert Image.open(io.BytesIO(jpeg.content)).format == "JPEG"
    forced = await client.get("/view", params={**image, "preview": "jpeg", "channel": "a"})
    assert forced.headers["content-type"] == "image/webp"
    alpha = Image.open(
        io.BytesIO((await client.get("/view", params={**image, "channel": "a"})).content)
    )
    assert (alpha.mode, alpha.getpixel((0, 0))[3]) == ("RGBA", 255)
    rgb = Image.open(
        io.BytesIO((await client.get("/view", params={**image, "channel": "rgb"})).content)
    )
    assert (rgb.mode, rgb.getpixel((0, 0))) == ("RGB", (0x10, 0x20, 0x30))


async def test_view_supports_ranges(client: httpx.AsyncClient) -> None:
    image = await saved(client)
    whole = await client.get("/view", params=image)
    part = await client.get("/view", params=image, headers={"Range": "bytes=0-7"})
    assert part.status_code == 206
    assert part.content == whole.content[:8] == b"\x89PNG\r\n\x1a\n"


async def test_view_answers_304_to_its_own_etag_and_previews_carry_none(
    client: httpx.AsyncClient,
) -> None:
    image = await saved(client)
    whole = await client.get("/view", params=image)
    again = await client.get(
        "/view", params=image, headers={"If-None-Match": whole.headers["etag"]}
    )
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["content-disposition"] == 'filename="pic_00001_.png"'
    preview = await client.get("/view", params={**image, "preview": "webp;50"})
    assert "etag" not in preview.headers


async def test_view_refusals_have_no_content_type(client: httpx.AsyncClient) -> None:
    for params in ({}, {"filename": ""}, {"filename": "x.png", "subfolder": ".."}):
        response = await client.get("/view", params=params)
        assert "content-type" not in response.headers, params
    metadata = await client.get("/view_metadata/checkpoints", params={"filename": "a"})
    assert (metadata.status_code, metadata.headers.get("content-type")) == (404, None)
