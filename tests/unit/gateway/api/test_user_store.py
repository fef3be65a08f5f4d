"""The user's folder: paths that stay inside it, listings as ComfyUI gives them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.api.user_store import UserData


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "a/../../x",
        "%2e%2e%2fx",
        "..",
        "a/%2E%2E/%2E%2E/x",
    ],
)
def test_a_name_leaving_the_user_folder_has_no_path(tmp_path: Path, name: str) -> None:
    assert UserData(tmp_path).path(name) is None


@pytest.mark.parametrize("name", ["a.json", "workflows/a.json", "w%2Fa.json", "x/../y.json"])
def test_a_name_inside_has_its_path_and_its_parent_is_made(tmp_path: Path, name: str) -> None:
    users = UserData(tmp_path)
    path = users.path(name)
    assert path is not None
    assert path.is_relative_to(tmp_path.resolve() / "default")
    assert path.parent.is_dir()


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    users = UserData(tmp_path / "users")
    users.user_dir.mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", users.user_dir / "link.txt")
    assert users.path("link.txt") is None


def test_settings_merge_and_a_corrupt_file_reads_as_none(tmp_path: Path) -> None:
    users = UserData(tmp_path)
    assert users.settings() == {}
    users.update_settings({"a": 1})
    users.update_settings({"b": [2]})
    assert users.settings() == {"a": 1, "b": [2]}
    (users.user_dir / "comfy.settings.json").write_text("{not json")
    assert users.settings() == {}


def test_listings_recurse_split_and_tree_put_folders_first_then_names(tmp_path: Path) -> None:
    users = UserData(tmp_path)
    for name in ("w/b.json", "w/sub/c.json", "w/A.json"):
        path = users.path(name)
        assert path is not None
        users.write(path, b"{}")
    folder = users.user_dir / "w"
    assert users.listing(folder, recurse=False, full_info=False, split=False) == [
        "A.json", "b.json",
    ]  # fmt: skip
    assert users.listing(folder, recurse=True, full_info=False, split=True)[-1] == [
        "sub/c.json", "sub", "c.json",
    ]  # fmt: skip
    assert [(e["path"], e["type"]) for e in users.tree(folder)] == [
        ("w/sub", "directory"), ("w/A.json", "file"), ("w/b.json", "file"),
        ("w/sub/c.json", "file"),
    ]  # fmt: skip
