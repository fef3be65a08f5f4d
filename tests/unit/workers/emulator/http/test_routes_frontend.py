"""The frontend's support routes and the /internal sub-application, in process."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import httpx
import pytest

from tests.unit.workers.emulator.conftest import Factory
from workers.comfy.modelfolders import FOLDERS
from workers.emulator.http.logring import LogRing
from workers.emulator.http.state import Emulator
from workers.emulator.http.users import UserDir

pytestmark = pytest.mark.timeout(30)

DATA = Path(__file__).resolve().parents[5] / "workers" / "emulator" / "data"


@pytest.mark.parametrize("prefix", ["", "/api"])
async def test_frontend_routes_answer_as_with_no_custom_nodes(
    client: httpx.AsyncClient, prefix: str
) -> None:
    empty: dict[str, object] = {}
    for path, body in (("/i18n", empty), ("/workflow_templates", empty), ("/settings", empty)):
        response = await client.get(prefix + path)
        assert (response.status_code, response.json()) == (200, body), path
    assert (await client.get(prefix + "/settings/Comfy.Locale")).json() is None


async def test_the_user_folder_is_made_by_the_first_settings_read(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/users")).json() == {"storage": "server", "migrated": False}
    await client.get("/settings")
    assert (await client.get("/api/users")).json() == {"storage": "server", "migrated": True}


@pytest.mark.parametrize(
    ("directory", "status", "migrated"),
    [
        ("", 400, False),
        ("..", 403, False),
        ("/etc", 403, False),
        ("%2e%2e", 403, False),
        (".", 404, False),
        ("workflows", 404, True),
        ("a/../workflows", 404, True),
    ],
)
def test_userdata_listing_statuses(directory: str, status: int, migrated: bool) -> None:
    users = UserDir()
    assert users.list_status(directory) == status
    assert users.migrated is migrated


async def test_userdata_answers_comfyuis_texts(client: httpx.AsyncClient) -> None:
    texts = {}
    for directory in ("", "..", "workflows"):
        response = await client.get("/userdata", params={"dir": directory})
        texts[response.status_code] = response.text
    assert texts == {
        400: "Directory not provided",
        403: "Invalid directory",
        404: "Directory not found",
    }
    assert (await client.get("/userdata", params={"dir": "."})).json() == []


async def test_model_folders_lie_under_the_base_directory(
    make_app: Factory, tmp_path: Path
) -> None:
    client, emulator = await make_app(base_dir=tmp_path / "base")
    base, output = str(tmp_path / "base"), emulator.dirs.output
    folders = (await client.get("/experiment/models")).json()
    assert [entry["name"] for entry in folders][:3] == ["checkpoints", "loras", "vae"]
    assert {"configs", "custom_nodes"}.isdisjoint(entry["name"] for entry in folders)
    by_name = {entry["name"]: entry["folders"] for entry in folders}
    assert by_name["checkpoints"] == [
        os.path.join(base, "models", "checkpoints"),
        os.path.join(output, "checkpoints"),
    ]
    assert by_name["text_encoders"][1:] == [
        os.path.join(base, "models", "clip"),
        os.path.join(output, "clip"),
    ]
    paths = (await client.get("/internal/folder_paths")).json()
    assert paths["custom_nodes"] == [os.path.join(base, "custom_nodes")]
    assert list(paths) == json.loads((DATA / "models.json").read_text())
    assert (await client.get("/experiment/models/loras")).json() == []
    missing = await client.get("/experiment/models/nope")
    assert (missing.status_code, missing.content) == (404, b"")


def test_the_folder_table_names_the_recorded_model_folders() -> None:
    assert [name for name, _ in FOLDERS] == json.loads((DATA / "models.json").read_text())


async def test_internal_logs_serve_the_recorded_lines(make_app: Factory) -> None:
    ring = LogRing()
    ring.setFormatter(logging.Formatter("%(message)s"))
    client, _ = await make_app(logs=ring)
    logger = logging.getLogger("tests.internal")
    logger.addHandler(ring)
    try:
        logger.warning("got prompt")
    finally:
        logger.removeHandler(ring)
    text = (await client.get("/internal/logs")).json()
    assert text.endswith(" - got prompt\n")
    raw = (await client.get("/internal/logs/raw")).json()
    assert raw["entries"][-1]["m"] == "got prompt\n"
    assert set(raw["size"]) == {"cols", "rows"}
    assert (await client.get("/api/internal/logs")).status_code == 404


async def test_internal_files_lists_newest_first(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    for age_s, name in ((30, "old.png"), (10, "new.png"), (20, "mid.png")):
        path = Path(emulator.dirs.output) / name
        path.write_bytes(b"x")
        os.utime(path, (1_000_000 - age_s, 1_000_000 - age_s))
    (Path(emulator.dirs.output) / "folder").mkdir()
    listing = await client.get("/internal/files/output")
    assert listing.json() == ["new.png", "mid.png", "old.png"]
    refused = await client.get("/internal/files/models")
    assert (refused.status_code, refused.json()) == (400, {"error": "Invalid directory type"})
