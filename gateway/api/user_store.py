"""The web frontend's user data, kept once for the farm: settings, saved workflows, templates.

As ComfyUI's UserManager without `--multi-user`: one user, `default`, whose files live in
`DATA_DIR/user/default/`. A path is joined to that folder and must stay inside it, else it is
refused (ComfyUI's answers: 403 for a file, 403 for a listed folder, 400 for `/v2/userdata`).
A name containing `%` is URL-decoded once more, as ComfyUI does. The workers' own user
folders are never used: settings saved through one worker would vanish behind another.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

DEFAULT_USER = "default"
SETTINGS_FILE = "comfy.settings.json"


class UserData:
    """The one user's folder under `root` (`DATA_DIR/user`)."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.user_dir = self.root / DEFAULT_USER

    # -- paths -------------------------------------------------------------------------------

    def path(self, name: str | None, *, create_parent: bool = True) -> Path | None:
        """The user's file or folder `name` (the user folder for None), or None when it would
        leave the user folder. As ComfyUI, the parent folder is made on the way."""
        path = self.user_dir
        if name is not None:
            if "%" in name:
                name = unquote(name)
            # Links resolved too: a link planted in the folder cannot lead out of it.
            path = Path(os.path.realpath(os.path.join(self.user_dir, name)))
            if os.path.commonpath((self.user_dir, path)) != str(self.user_dir):
                return None
        if create_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def migrated(self) -> bool:
        """`GET /users`' `migrated`: whether the user folder exists yet."""
        return self.user_dir.is_dir()

    def relative(self, path: Path) -> str:
        return path.relative_to(self.user_dir).as_posix()

    def file_info(self, path: Path, relative_to: Path) -> dict[str, Any]:
        stat = path.stat()
        return {
            "path": path.relative_to(relative_to).as_posix(),
            "size": stat.st_size,
            "modified": stat.st_mtime,
            "created": stat.st_ctime,
        }

    # -- listings ----------------------------------------------------------------------------

    def listing(self, folder: Path, *, recurse: bool, full_info: bool, split: bool) -> list[Any]:
        """`GET /userdata?dir=`: the files in a folder (and below, with `recurse`)."""
        files = folder.rglob("*") if recurse else folder.glob("*")
        found = sorted(path for path in files if path.is_file())
        if full_info:
            return [self.file_info(path, folder) for path in found]
        relative = [path.relative_to(folder).as_posix() for path in found]
        return [[rel, *rel.split("/")] for rel in relative] if split else relative

    def tree(self, folder: Path) -> list[dict[str, Any]]:
        """`GET /v2/userdata?path=`: every folder and file below, folders first, by name."""
        entries: list[dict[str, Any]] = []
        for path in folder.rglob("*"):
            entry: dict[str, Any] = {"name": path.name, "path": self.relative(path)}
            if path.is_dir():
                entry["type"] = "directory"
            else:
                stat = path.stat()
                entry.update(type="file", size=stat.st_size, modified=stat.st_mtime)
            entries.append(entry)
        entries.sort(key=lambda e: (e["type"] != "directory", e["name"].lower()))
        return entries

    # -- files -------------------------------------------------------------------------------

    def write(self, path: Path, body: bytes) -> None:
        """Replace the file whole: a reader never sees half of it (raises OSError)."""
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(body)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def move(self, source: Path, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, dest)

    # -- settings ----------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The user's settings; a missing or corrupt file reads as none (as ComfyUI)."""
        path = self.path(SETTINGS_FILE)
        assert path is not None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def update_settings(self, changes: dict[str, Any]) -> None:
        """Merge `changes` into the settings (read and written with no await between, so two
        requests of this node never lose each other's change)."""
        path = self.path(SETTINGS_FILE)
        assert path is not None
        merged = {**self.settings(), **changes}
        self.write(path, json.dumps(merged, indent=4).encode())
