"""POST /upload/image and /upload/mask, and an upload used by LoadImage (PROTOCOL.md 1.5)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.contract import api, graphs, images

RED, BLUE = (255, 0, 0), (0, 0, 255)


async def upload(
    http: httpx.AsyncClient, name: str, data: bytes, path: str = "/upload/image", **fields: str
) -> httpx.Response:
    return await http.post(path, files={"image": (name, data, "image/png")}, data=fields)


async def upload_ok(
    http: httpx.AsyncClient, name: str, data: bytes, **fields: str
) -> dict[str, Any]:
    response = await upload(http, name, data, **fields)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def view_input(http: httpx.AsyncClient, name: str, subfolder: str = "") -> bytes:
    params = {"filename": name, "type": "input", "subfolder": subfolder}
    response = await http.get("/view", params=params)
    assert response.status_code == 200
    return response.content


async def test_an_upload_answers_its_name_subfolder_and_type(http: httpx.AsyncClient) -> None:
    name = api.unique("red") + ".png"
    assert await upload_ok(http, name, images.png(RED)) == {
        "name": name,
        "subfolder": "",
        "type": "input",
    }
    assert await view_input(http, name) == images.png(RED)


async def test_the_same_content_under_the_same_name_is_reused(http: httpx.AsyncClient) -> None:
    name = api.unique("same") + ".png"
    await upload_ok(http, name, images.png(RED))
    assert (await upload_ok(http, name, images.png(RED)))["name"] == name


async def test_other_content_under_a_taken_name_gets_a_numbered_name(
    http: httpx.AsyncClient,
) -> None:
    stem = api.unique("taken")
    await upload_ok(http, f"{stem}.png", images.png(RED))
    assert (await upload_ok(http, f"{stem}.png", images.png(BLUE)))["name"] == f"{stem} (1).png"
    green = images.png((0, 255, 0))
    assert (await upload_ok(http, f"{stem}.png", green))["name"] == f"{stem} (2).png"
    assert await view_input(http, f"{stem}.png") == images.png(RED)


async def test_overwrite_replaces_the_file_under_the_same_name(http: httpx.AsyncClient) -> None:
    name = api.unique("over") + ".png"
    await upload_ok(http, name, images.png(RED))
    body = await upload_ok(http, name, images.png(BLUE), overwrite="true")
    assert body["name"] == name
    assert await view_input(http, name) == images.png(BLUE)


async def test_an_upload_into_a_subfolder_echoes_it_and_creates_it(
    http: httpx.AsyncClient,
) -> None:
    subfolder, name = api.unique("sub"), "red.png"
    body = await upload_ok(http, name, images.png(RED), subfolder=subfolder)
    assert body == {"name": name, "subfolder": subfolder, "type": "input"}
    assert await view_input(http, name, subfolder) == images.png(RED)


async def test_an_upload_escaping_the_input_folder_is_400(http: httpx.AsyncClient) -> None:
    response = await upload(http, "x.png", images.png(RED), subfolder="../..")
    assert response.status_code == 400


async def test_an_upload_without_an_image_part_is_400(http: httpx.AsyncClient) -> None:
    response = await http.post("/upload/image", data={"type": "input"})
    assert response.status_code == 400


async def load_upload(http: httpx.AsyncClient, prefix: str, data: bytes) -> Image.Image:
    """Upload `data`, run LoadImage -> SaveImage on it and return the saved image."""
    name = (await upload_ok(http, api.unique("load") + ".png", data))["name"]
    entry = await api.run(http, graphs.load_and_save(name, prefix))
    assert entry["status"]["status_str"] == "success"
    [saved] = api.images(entry, "2")
    response = await http.get("/view", params=saved)
    return images.decode(response.content)


async def test_an_uploaded_image_can_be_loaded_by_a_prompt(
    http: httpx.AsyncClient, prefix: str
) -> None:
    image = await load_upload(http, prefix, images.png(BLUE))
    assert image.size == (8, 8)


# The emulator draws every picture as a flat tint of the right size (emulator/nodeoutputs.py).
@pytest.mark.comfyui
async def test_a_loaded_upload_is_saved_pixel_for_pixel(
    http: httpx.AsyncClient, prefix: str
) -> None:
    image = await load_upload(http, prefix, images.png(BLUE))
    assert image.convert("RGB").getpixel((3, 3)) == BLUE


async def test_loading_a_file_that_was_never_uploaded_fails_validation(
    http: httpx.AsyncClient, prefix: str
) -> None:
    prompt = graphs.load_and_save(api.unique("absent") + ".png", prefix)
    response = await http.post("/prompt", json={"prompt": prompt})
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["type"] == "prompt_outputs_failed_validation"
    [error] = body["node_errors"]["1"]["errors"]
    assert error["type"] == "custom_validation_failed"
    assert error["extra_info"]["input_name"] == "image"


async def test_a_mask_upload_puts_its_alpha_on_the_original_image(
    http: httpx.AsyncClient,
) -> None:
    original = (await upload_ok(http, api.unique("orig") + ".png", images.png(RED)))["name"]
    mask_name = api.unique("mask") + ".png"
    ref = json.dumps({"filename": original, "type": "input", "subfolder": ""})
    response = await upload(
        http, mask_name, images.half_transparent(), path="/upload/mask", original_ref=ref
    )
    assert response.status_code == 200
    assert response.json() == {"name": mask_name, "subfolder": "", "type": "input"}
    masked = images.decode(await view_input(http, mask_name))
    assert masked.mode == "RGBA"
    assert masked.getpixel((0, 0)) == (*RED, 0)
    assert masked.getpixel((7, 0)) == (*RED, 255)
