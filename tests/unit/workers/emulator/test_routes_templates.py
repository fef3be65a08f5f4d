"""The emulator's workflow templates (`/templates/`), in process: the index the web frontend
reads, each template's workflow queued as its Run button would queue it, thumbnails, and the
static resource's answers to bad paths."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.unit.workers.emulator.conftest import Factory, run_to_history
from tests.unit.workers.emulator.editor_graphs import to_prompt
from workers.emulator.config import DEFAULT_CHECKPOINTS
from workers.emulator.http.routes.templates import TEMPLATES_DIR

pytestmark = pytest.mark.timeout(30)

INDEX: list[dict[str, Any]] = json.loads((TEMPLATES_DIR / "index.json").read_text())
NAMES = [template["name"] for category in INDEX for template in category["templates"]]


@pytest.fixture
async def client(make_app: Factory) -> httpx.AsyncClient:
    """An instance with its default catalogue, the one `comfy-gateway serve` emulates."""
    started, _ = await make_app(checkpoints=DEFAULT_CHECKPOINTS)
    return started


async def test_the_index_lists_categories_of_templates_as_the_frontend_reads_them(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/templates/index.json")
    assert response.status_code == 200
    # The frontend takes the index only from a JSON answer.
    assert response.headers["content-type"] == "application/json"
    assert response.headers["cache-control"] == "no-cache"
    categories = response.json()
    assert [c["moduleName"] for c in categories] == ["default"]
    for template in categories[0]["templates"]:
        assert {"name", "title", "description", "mediaType", "mediaSubtype"} <= set(template)
    assert NAMES[0] == "image_z_image_turbo", "the frontend's default graph comes first"
    assert {"default", "sdxl_simple_example"} <= set(NAMES)


@pytest.mark.parametrize("locale", ["zh", "pt-BR"])
async def test_a_translated_index_is_the_index_and_the_logo_index_is_empty(
    client: httpx.AsyncClient, locale: str
) -> None:
    translated = await client.get(f"/templates/index.{locale}.json")
    assert (translated.status_code, translated.json()) == (200, INDEX)
    logos = await client.get("/templates/index_logo.json")
    assert (logos.status_code, logos.json()) == (200, {})


@pytest.mark.parametrize("name", NAMES)
async def test_each_template_queues_and_saves_an_image(
    client: httpx.AsyncClient, name: str
) -> None:
    workflow = (await client.get(f"/templates/{name}.json")).json()
    object_info = (await client.get("/object_info")).json()
    entry = await run_to_history(client, {"prompt": to_prompt(workflow, object_info)})
    assert entry["status"]["status_str"] == "success", entry["status"]
    saved = [node["images"] for node in entry["outputs"].values() if "images" in node]
    assert saved and saved[0][0]["type"] == "output"


@pytest.mark.parametrize("name", NAMES)
async def test_each_template_has_the_thumbnail_its_media_type_names(
    client: httpx.AsyncClient, name: str
) -> None:
    template = next(t for c in INDEX for t in c["templates"] if t["name"] == name)
    response = await client.get(f"/templates/{name}-1.{template['mediaSubtype']}")
    assert response.status_code == 200
    assert response.headers["content-type"] == f"image/{template['mediaSubtype']}"
    assert response.headers["cache-control"] == "public, max-age=86400"
    assert Image.open(io.BytesIO(response.content)).format == "WEBP"


@pytest.mark.parametrize(
    ("path", "status", "body"),
    [
        ("/templates/no_such_template.json", 404, ""),
        ("/templates/index.xx.json", 404, ""),
        # The emulator's data folder, one level up, holds object_info.json.
        ("/templates/..%2fobject_info.json", 404, "404: Not Found"),
        ("/templates/%2e%2e/%2e%2e/config.py", 404, "404: Not Found"),
        ("/templates//etc/passwd", 404, "404: Not Found"),
        ("/templates/index.json%00", 404, "404: Not Found"),
        ("/templates/", 403, "403: Forbidden"),
        # A static resource of ComfyUI's has no /api alias: the web root's missing file.
        ("/api/templates/index.json", 404, ""),
    ],
)
async def test_bad_paths_are_answered_as_comfyuis_static_resource(
    client: httpx.AsyncClient, path: str, status: int, body: str
) -> None:
    response = await client.get(path)
    assert (response.status_code, response.text) == (status, body)
