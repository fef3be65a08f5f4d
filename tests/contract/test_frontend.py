"""Routes ComfyUI serves for its frontend even without one: users and settings (single-user
mode), translations and templates (no custom node contributes any), model folders, config
files, and the `/internal` sub-application (never under `/api`)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.contract import api, graphs

LOG_ENTRY = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)? - ")
SHIPPED_CONFIGS = {"v1-inference.yaml", "v2-inference.yaml", "anything_v3.yaml"}


@pytest.mark.parametrize("prefix", ["", "/api"])
async def test_frontend_routes_without_custom_nodes_answer_empty_objects(
    http: httpx.AsyncClient, prefix: str
) -> None:
    for path in ("/i18n", "/workflow_templates"):
        response = await http.get(prefix + path)
        assert (response.status_code, response.json()) == (200, {}), path
    assert isinstance((await http.get(prefix + "/settings")).json(), dict)
    assert (await http.get(f"{prefix}/settings/{api.unique('Contract.Unset')}")).json() is None


async def test_users_reports_server_storage_and_the_user_folder_once_made(
    http: httpx.AsyncClient,
) -> None:
    before = (await http.get("/users")).json()
    assert before == {"storage": "server", "migrated": before["migrated"]}
    assert isinstance(before["migrated"], bool)
    # Listing a folder in the user's data makes the user's own folder first.
    listing = await http.get("/userdata", params={"dir": api.unique("contract")})
    assert (listing.status_code, listing.text) == (404, "Directory not found")
    assert (await http.get("/api/users")).json() == {"storage": "server", "migrated": True}


@pytest.mark.parametrize(
    ("directory", "status", "text"),
    [("", 400, "Directory not provided"), ("..", 403, "Invalid directory")],
)
async def test_userdata_refuses_missing_and_escaping_folders(
    http: httpx.AsyncClient, directory: str, status: int, text: str
) -> None:
    response = await http.get("/userdata", params={"dir": directory})
    assert (response.status_code, response.text) == (status, text)
    assert response.headers["content-type"] == "text/plain; charset=utf-8"


async def test_experiment_models_lists_model_folders_with_their_paths(
    http: httpx.AsyncClient,
) -> None:
    folders = (await http.get("/experiment/models")).json()
    names = [entry["name"] for entry in folders]
    every = (await http.get("/models")).json()
    assert names == [name for name in every if name not in ("configs", "custom_nodes")]
    by_name = {entry["name"]: entry["folders"] for entry in folders}
    assert all(path.startswith("/") for paths in by_name.values() for path in paths)
    assert by_name["checkpoints"][0].endswith("/models/checkpoints")
    assert by_name["checkpoints"][1].endswith("/checkpoints")
    assert (await http.get("/api/experiment/models")).json() == folders
    assert (await http.get("/experiment/models/loras")).status_code == 200
    missing = await http.get("/experiment/models/no_such_folder")
    assert (missing.status_code, missing.content) == (404, b"")


async def test_models_configs_lists_the_shipped_yaml_files(http: httpx.AsyncClient) -> None:
    names = (await http.get("/models/configs")).json()
    assert names == sorted(names)
    assert set(names) >= SHIPPED_CONFIGS
    assert all(name.endswith(".yaml") for name in names)


async def test_internal_logs_is_the_recent_log_as_one_string(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    # ComfyUI logs "got prompt" as any POST /prompt arrives, valid or not.
    await http.post("/prompt", json={"prompt": {}})
    log = (await http.get("/internal/logs")).json()
    assert isinstance(log, str)
    assert LOG_ENTRY.match(log)
    assert "got prompt\n" in log
    raw = (await http.get("/internal/logs/raw")).json()
    assert set(raw) == {"entries", "size"}
    assert set(raw["size"]) == {"cols", "rows"}
    assert all(set(entry) == {"t", "m"} for entry in raw["entries"])
    assert raw["entries"][-1]["m"].endswith("\n")


async def test_internal_files_lists_outputs_newest_first(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    entry = await api.run(http, graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()))
    [image] = api.images(entry, graphs.SAVE)
    names = (await http.get("/internal/files/output")).json()
    assert names[0] == image["filename"]
    refused = await http.get("/internal/files/models")
    assert (refused.status_code, refused.json()) == (400, {"error": "Invalid directory type"})


async def test_internal_folder_paths_names_every_folder(http: httpx.AsyncClient) -> None:
    paths = (await http.get("/internal/folder_paths")).json()
    assert list(paths) == (await http.get("/models")).json()
    assert all(isinstance(folders, list) for folders in paths.values())
