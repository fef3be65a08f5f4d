"""Paths as ComfyUI checks and names them (PROTOCOL.md 1.4, 3.6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.emulator.files import Dirs, SavePathError, save_path, served_content_type, view_target


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    made = Dirs.create(tmp_path / "in", tmp_path / "out", tmp_path / "tmp")
    Path(made.output, "sub").mkdir()
    Path(made.output, "sub", "x.png").write_bytes(b"png")
    Path(made.input, "i.png").write_bytes(b"png")
    return made


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, 404),
        ({"filename": ""}, 400),
        ({"filename": " [output]"}, 400),
        ({"filename": "/x.png"}, 400),
        ({"filename": "..x.png"}, 400),
        ({"filename": "x.png", "type": "other"}, 400),
        ({"filename": "x.png", "subfolder": "../.."}, 403),
        ({"filename": "x.png", "subfolder": "/etc"}, 403),
        ({"filename": "x.png"}, 404),
        ({"filename": "x.png", "subfolder": "sub"}, "out/sub/x.png"),
        ({"filename": "sub/x.png"}, 404),  # only the basename counts
        ({"filename": "i.png", "type": "input"}, "in/i.png"),
        ({"filename": "i.png [input]", "type": "temp"}, "in/i.png"),
        ({"filename": "i.png[input]"}, 404),  # the fixed-length cut eats a character
    ],
)
def test_view_target(
    dirs: Dirs, tmp_path: Path, query: dict[str, str], expected: int | str
) -> None:
    result = view_target(dirs, query)
    if isinstance(expected, str):
        assert result == os.path.join(tmp_path, expected)
    else:
        assert result == expected


def test_temp_directory_is_emptied_at_start(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "old.png").write_bytes(b"")
    dirs = Dirs.create(tmp_path / "in", tmp_path / "out", tmp_path / "tmp")
    assert os.listdir(dirs.temp) == []


def test_input_images_are_top_level_image_files(dirs: Dirs) -> None:
    Path(dirs.input, "notes.txt").write_text("x")
    Path(dirs.input, "deep").mkdir()
    Path(dirs.input, "deep", "d.png").write_bytes(b"")
    assert dirs.input_images() == ["i.png"]
    assert dirs.exists_annotated("deep/d.png")
    assert dirs.exists_annotated("x.png [output]") is False
    assert dirs.exists_annotated("sub/x.png [output]")


@pytest.mark.parametrize(
    ("existing", "prefix", "counter", "subfolder"),
    [
        ([], "ComfyUI", 1, ""),
        (["ComfyUI_00001_.png", "ComfyUI_00002_.png"], "ComfyUI", 3, ""),
        (["ComfyUI_00009_.png", "ComfyUIx_00050_.png", "other_00070_.png"], "ComfyUI", 10, ""),
        (["a_b_00004_.png"], "a_b", 5, ""),
        (["probe_00003_.png"], "sub/probe", 1, "sub"),
    ],
)
def test_save_counter(
    dirs: Dirs, existing: list[str], prefix: str, counter: int, subfolder: str
) -> None:
    for name in existing:
        Path(dirs.output, name).write_bytes(b"")
    where = save_path(prefix, dirs.output, 64, 64)
    assert (where.counter, where.subfolder) == (counter, subfolder)
    assert os.path.isdir(where.folder)


def test_save_prefix_variables_and_escape(dirs: Dirs) -> None:
    assert save_path("img_%width%x%height%", dirs.output, 640, 480).filename == "img_640x480"
    with pytest.raises(SavePathError, match="outside the output folder"):
        save_path("../out", dirs.output, 1, 1)


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("a.png", "image/png"),
        ("a.html", "application/octet-stream"),
        ("a.css", "application/octet-stream"),
        ("a", "application/octet-stream"),
    ],
)
def test_served_content_types(name: str, content_type: str) -> None:
    assert served_content_type(name) == content_type
