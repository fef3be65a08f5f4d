"""The instance's input, output and temp directories, and ComfyUI's rules for paths in them.

Path checks follow ComfyUI 0.3.64's `folder_paths` and `server.py` in order and outcome
(`/view`: 404 without a filename, annotation suffix, 400 empty or `/`-leading or `..`,
403 for a subfolder escaping its directory, 404 when not a file).
"""

from __future__ import annotations

import mimetypes
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workers.comfy.folders import content_type

_ANNOTATIONS = (("[output]", "output", 9), ("[input]", "input", 8), ("[temp]", "temp", 7))


class SavePathError(Exception):
    """A filename_prefix that would leave the output folder (ComfyUI raises Exception)."""


@dataclass(frozen=True)
class Dirs:
    """Absolute input, output and temp directories (strings, as ComfyUI compares them)."""

    input: str
    output: str
    temp: str

    @classmethod
    def create(cls, input_dir: Path, output_dir: Path, temp_dir: Path) -> Dirs:
        """Make the directories; the temp dir is emptied first, as ComfyUI does at start."""
        shutil.rmtree(temp_dir, ignore_errors=True)
        for path in (input_dir, output_dir, temp_dir):
            path.mkdir(parents=True, exist_ok=True)
        return cls(
            input=os.path.abspath(input_dir),
            output=os.path.abspath(output_dir),
            temp=os.path.abspath(temp_dir),
        )

    def by_type(self, kind: str | None) -> str | None:
        """The directory of a `type` value ("output", "input", "temp"), else None."""
        return {"output": self.output, "input": self.input, "temp": self.temp}.get(kind or "")

    def annotated(self, name: str) -> tuple[str, str | None]:
        """Strip a " [output]"-style suffix: (name, its directory) or (name, None).

        ComfyUI cuts a fixed length (suffix plus one character for the space), so
        "x.png[output]" loses a character of the name too; kept as is.
        """
        for suffix, kind, cut in _ANNOTATIONS:
            if name.endswith(suffix):
                return name[:-cut], self.by_type(kind)
        return name, None

    def annotated_path(self, name: str) -> str:
        """Where a LoadImage value points (default: the input directory)."""
        name, base = self.annotated(name)
        return os.path.join(base or self.input, name)

    def exists_annotated(self, name: str) -> bool:
        return os.path.exists(self.annotated_path(name))

    def input_files(self) -> list[str]:
        """Top-level files of the input directory (what LoadImage's list is built from)."""
        try:
            names = os.listdir(self.input)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if os.path.isfile(os.path.join(self.input, n)))

    def input_images(self) -> list[str]:
        return [name for name in self.input_files() if content_type(name) == "image"]

    def clean_temp(self) -> None:
        """ComfyUI deletes its temp directory at start and at clean exit."""
        shutil.rmtree(self.temp, ignore_errors=True)


def view_target(dirs: Dirs, query: Mapping[str, str]) -> str | int:
    """The file `GET /view` serves, or the status code ComfyUI answers instead."""
    if "filename" not in query:
        return 404
    filename, base = dirs.annotated(query["filename"])
    if not filename:
        return 400
    if filename[0] == "/" or ".." in filename:
        return 400
    if base is None:
        base = dirs.by_type(query.get("type", "output"))
    if base is None:
        return 400
    if "subfolder" in query:
        folder = os.path.join(base, query["subfolder"])
        if os.path.commonpath((os.path.abspath(folder), base)) != base:
            return 403
        base = folder
    path = os.path.join(base, os.path.basename(filename))
    return path if os.path.isfile(path) else 404


def served_content_type(filename: str) -> str:
    """The Content-Type of a file served as is; markup and scripts are forced to download."""
    guessed = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    forced = {"text/html", "text/html-sandboxed", "application/xhtml+xml", "text/javascript"}
    return "application/octet-stream" if guessed in forced | {"text/css"} else guessed


@dataclass(frozen=True)
class SavePath:
    """Where SaveImage writes: folder, bare name, first counter, and the UI's subfolder."""

    folder: str
    filename: str
    counter: int
    subfolder: str


def expand_prefix(prefix: str, width: int, height: int) -> str:
    """ComfyUI's %width%, %height%, %year% ... %second% substitutions (local time)."""
    now = time.localtime()
    values = {
        "%width%": str(width),
        "%height%": str(height),
        "%year%": str(now.tm_year),
        "%month%": f"{now.tm_mon:02}",
        "%day%": f"{now.tm_mday:02}",
        "%hour%": f"{now.tm_hour:02}",
        "%minute%": f"{now.tm_min:02}",
        "%second%": f"{now.tm_sec:02}",
    }
    for key, value in values.items():
        prefix = prefix.replace(key, value)
    return prefix


def save_path(prefix: str, output_dir: str, width: int, height: int) -> SavePath:
    """ComfyUI's `get_save_image_path`: counter = 1 + the highest `<name>_NNNNN_` in the folder.

    Raises SavePathError when the prefix leaves `output_dir`.
    """
    if "%" in prefix:
        prefix = expand_prefix(prefix, width, height)
    subfolder = os.path.dirname(os.path.normpath(prefix))
    filename = os.path.basename(os.path.normpath(prefix))
    folder = os.path.join(output_dir, subfolder)
    common = os.path.commonpath((output_dir, os.path.abspath(folder)))
    if common != output_dir:
        raise SavePathError(
            "**** ERROR: Saving image outside the output folder is not allowed."
            f"\n full_output_folder: {os.path.abspath(folder)}"
            f"\n         output_dir: {output_dir}"
            f"\n         commonpath: {common}"
        )
    try:
        existing = os.listdir(folder)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        existing = []
    counter = _next_counter(existing, filename, len(os.path.basename(prefix)))
    return SavePath(folder, filename, counter, subfolder)


def _next_counter(existing: list[str], filename: str, prefix_len: int) -> int:
    counters = [0]
    found = False
    for name in existing:
        head = name[: prefix_len + 1]
        if os.path.normcase(head[:-1]) != os.path.normcase(filename) or head[-1:] != "_":
            continue
        found = True
        try:
            counters.append(int(name[prefix_len + 1 :].split("_")[0]))
        except ValueError:
            counters.append(0)
    return max(counters) + 1 if found else 1
