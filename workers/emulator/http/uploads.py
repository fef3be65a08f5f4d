"""`POST /upload/image` and `/upload/mask`, with ComfyUI 0.3.64's outcomes.

Same-name uploads: overwritten with `overwrite=true|1`; otherwise an existing file with the same
sha256 is reused (no write), and different content gets "name (1).ext", "name (2).ext", ...
Quirks kept: an unknown `type` is a server error (500); a mask whose `original_ref` cannot be
resolved answers 200 with the name but writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from workers.emulator.files import Dirs
from workers.emulator.http import images

SaveFunction = Callable[[Any, Mapping[str, Any], str], None]


class UnknownUploadType(ValueError):
    """ComfyUI fails with an UnboundLocalError here, which aiohttp turns into a 500."""


def _upload_dir(dirs: Dirs, kind: Any) -> tuple[str, str]:
    kind = "input" if kind is None else kind
    path = dirs.by_type(kind) if isinstance(kind, str) else None
    if path is None:
        raise UnknownUploadType(f"unknown upload type {kind!r}")
    return path, kind


def _same_content(path: str, upload: Any) -> bool:
    if not os.path.exists(path):
        return False
    with open(path, "rb") as handle:
        existing = hashlib.sha256(handle.read()).hexdigest()
    incoming = hashlib.sha256(upload.file.read()).hexdigest()
    upload.file.seek(0)
    return existing == incoming


def upload(dirs: Dirs, form: Mapping[str, Any], save: SaveFunction | None = None) -> Any:
    """The JSON body of a successful upload, or an int status (400) to answer instead."""
    image = form.get("image")
    directory, kind = _upload_dir(dirs, form.get("type"))
    if not (image and image.file):
        return 400
    filename = image.filename
    if not filename:
        return 400
    subfolder = form.get("subfolder", "")
    folder = os.path.join(directory, os.path.normpath(subfolder))
    path = os.path.abspath(os.path.join(folder, filename))
    if os.path.commonpath((directory, path)) != directory:
        return 400
    os.makedirs(folder, exist_ok=True)
    filename, path, duplicate = _free_name(form.get("overwrite"), folder, filename, path, image)
    if not duplicate:
        if save is not None:
            save(image, form, path)
        else:
            with open(path, "wb") as handle:
                handle.write(image.file.read())
    return {"name": filename, "subfolder": subfolder, "type": kind}


def _free_name(
    overwrite: Any, folder: str, filename: str, path: str, image: Any
) -> tuple[str, str, bool]:
    """(name, path, is_duplicate) after ComfyUI's de-duplication loop."""
    if overwrite in ("true", "1"):
        return filename, path, False
    stem, ext = os.path.splitext(filename)
    index = 1
    while os.path.exists(path):
        if _same_content(path, image):
            return filename, path, True
        filename = f"{stem} ({index}){ext}"
        path = os.path.join(folder, filename)
        index += 1
    return filename, path, False


def mask_saver(dirs: Dirs) -> SaveFunction:
    """The save step of /upload/mask: composite the mask's alpha onto `original_ref`."""

    def save(image: Any, form: Mapping[str, Any], path: str) -> None:
        original = _original_path(dirs, json.loads(form["original_ref"]))
        if original is not None and os.path.isfile(original):
            images.apply_mask(original, image.file, path)

    return save


def _original_path(dirs: Dirs, ref: Mapping[str, Any]) -> str | None:
    filename, base = dirs.annotated(ref["filename"])
    if not filename or filename[0] == "/" or ".." in filename:
        return None
    if base is None:
        base = dirs.by_type(ref.get("type", "output"))
    if base is None:
        return None
    subfolder = ref.get("subfolder", "")
    if subfolder != "":
        folder = os.path.join(base, subfolder)
        if os.path.commonpath((os.path.abspath(folder), base)) != base:
            return None
        base = folder
    return os.path.join(base, filename)
