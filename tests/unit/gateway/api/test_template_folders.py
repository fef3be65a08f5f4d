"""Where the workflow templates come from: the installed packages' folders, and what an empty
template set answers for the indexes the frontend reads first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.api.template_folders import TemplateFolders, empty_index, find_template_folders


@pytest.mark.parametrize(
    ("path", "empty"),
    [
        ("index.json", []),
        ("index.fr.json", []),
        ("index.pt-BR.json", []),
        ("index_logo.json", {}),
        ("default.json", None),
        ("default-1.webp", None),
        ("sub/index.json", None),
        ("index.json.bak", None),
    ],
)
def test_only_the_indexes_have_an_empty_answer(path: str, empty: Any) -> None:
    assert empty_index(path) == empty


def test_the_first_folder_with_the_file_serves_it_and_nothing_outside(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
    (first / "index.json").write_text("[]")
    (second / "index.json").write_text('["second"]')
    (second / "t.json").write_text("{}")
    (tmp_path / "outside.json").write_text("{}")
    folders = TemplateFolders((first.resolve(), second.resolve()))
    assert folders.file("index.json") == (first / "index.json").resolve()
    assert folders.file("t.json") == (second / "t.json").resolve()
    assert folders.file("../outside.json") is None
    assert folders.file("missing.json") is None


def test_every_installed_bundle_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for package in ("comfyui_workflow_templates_json", "comfyui_workflow_templates_media_x"):
        (tmp_path / package / "templates").mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "comfyui_workflow_templates_core").mkdir()  # code only, no templates folder
    (tmp_path / "comfyui_workflow_templates_core" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [f for f in find_template_folders().folders if f.is_relative_to(tmp_path.resolve())]
    assert [folder.parent.name for folder in found] == [
        "comfyui_workflow_templates_json",
        "comfyui_workflow_templates_media_x",
    ]
