"""The emulator answers the catalogue routes like the real ComfyUI at COMFYUI_URL.

Only file lists may differ (each server has its own disk), and classes that depend on optional
packages of the real install (the emulator serves the recorded catalogue).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.contract import graphs
from tests.contract.servers import FAST_TIME_SCALE, Server, emulator

pytestmark = pytest.mark.comfyui

# Inputs whose combo lists the server's own files.
FILE_COMBOS = {"CheckpointLoaderSimple": "ckpt_name", "LoadImage": "image"}
USED_CLASSES = sorted(
    {node["class_type"] for node in graphs.recorded_prompt().values()} | set(FILE_COMBOS)
)


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with emulator(tmp_path_factory.mktemp("parity"), time_scale=FAST_TIME_SCALE) as started:
        yield started


def get(server: Server, path: str) -> Any:
    response = httpx.get(server.url + path, timeout=30.0)
    assert response.status_code == 200
    return response.json()


def without_files(class_type: str, info: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(info)
    if class_type in FILE_COMBOS:
        stripped["input"]["required"][FILE_COMBOS[class_type]][0] = []
    return stripped


def shape(value: Any) -> Any:
    """Types and key sets, recursively: what a client can rely on in a volatile answer."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def relative_folders(folders: dict[str, list[str]]) -> dict[str, list[str]]:
    """Folder paths relative to the output directory or else the base directory, which
    `checkpoints` reveals (`<base>/models/checkpoints`, `<output>/checkpoints`)."""
    base = folders["checkpoints"][0].removesuffix("/models/checkpoints")
    output = folders["checkpoints"][1].removesuffix("/checkpoints")

    def relative(path: str) -> str:
        if path.startswith(output + "/"):
            return "<output>/" + path.removeprefix(output + "/")
        return "<base>/" + path.removeprefix(base + "/")

    return {name: [relative(path) for path in paths] for name, paths in folders.items()}


@pytest.mark.parametrize(
    "path",
    [
        "/features",
        "/models",
        "/models/configs",
        "/embeddings",
        "/extensions",
        "/i18n",
        "/workflow_templates",
    ],
)
def test_static_listings_are_equal(server: Server, emulated: Server, path: str) -> None:
    assert get(emulated, path) == get(server, path)


def test_model_folders_have_the_same_layout(server: Server, emulated: Server) -> None:
    real, fake = get(server, "/internal/folder_paths"), get(emulated, "/internal/folder_paths")
    assert relative_folders(fake) == relative_folders(real)
    listed = get(emulated, "/experiment/models")
    assert [entry["name"] for entry in listed] == [
        entry["name"] for entry in get(server, "/experiment/models")
    ]


def test_system_stats_have_the_same_shape(server: Server, emulated: Server) -> None:
    real, fake = get(server, "/system_stats"), get(emulated, "/system_stats")
    assert set(fake["system"]) == set(real["system"])
    assert shape(fake["devices"][0]).keys() == shape(real["devices"][0]).keys()


@pytest.mark.parametrize("class_type", USED_CLASSES)
def test_the_catalogue_entry_of_a_used_class_is_equal(
    server: Server, emulated: Server, class_type: str
) -> None:
    real = get(server, f"/object_info/{class_type}")[class_type]
    fake = get(emulated, f"/object_info/{class_type}")[class_type]
    assert without_files(class_type, fake) == without_files(class_type, real)


def test_the_emulator_lists_no_class_the_real_server_lacks(
    server: Server, emulated: Server
) -> None:
    assert set(get(emulated, "/object_info")) <= set(get(server, "/object_info"))
