"""The emulated instance's node catalogue and the other recorded listings it serves.

The catalogue is the `GET /object_info` of a real ComfyUI 0.3.64 (`data/object_info.json`)
with this instance's own file lists in place of the recorded ones: its model folders'
files (checkpoints, diffusion models, text encoders, VAEs, LoRAs, ...), and its input
directory's images for LoadImage (listed anew at every request, as ComfyUI does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from workers.comfy.catalog import Catalog
from workers.comfy.checks import CustomCheck, file_checks
from workers.comfy.folders import with_file_lists
from workers.comfy.modelfolders import MODEL_FOLDERS
from workers.emulator.files import Dirs

_PACKAGE = "workers.emulator"


def recorded(name: str) -> Any:
    """A JSON file of `data/` (recorded from a real ComfyUI)."""
    text = resources.files(_PACKAGE).joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(text)


class NodeCatalog:
    """Node classes of this instance, with its file lists."""

    def __init__(
        self, recorded_info: dict[str, Any], models: Mapping[str, Sequence[str]], dirs: Dirs
    ):
        self._base = Catalog.from_object_info(recorded_info)
        # Every model folder is this instance's: one it was given no files for lists none.
        self._models = {folder: () for folder in MODEL_FOLDERS} | {
            folder: tuple(sorted(set(names))) for folder, names in models.items()
        }
        self._dirs = dirs
        self.validation = with_file_lists(self._base, self._models)
        self._served: tuple[tuple[str, ...], bytes] | None = None

    @classmethod
    def load(cls, models: Mapping[str, Sequence[str]], dirs: Dirs) -> NodeCatalog:
        """The recorded catalogue with `models` (folder -> files) as this instance's files."""
        return cls(recorded("object_info.json"), models, dirs)

    @property
    def checkpoints(self) -> tuple[str, ...]:
        return self.files("checkpoints")

    def files(self, folder: str) -> tuple[str, ...]:
        """The files of one model folder, sorted (none for a folder it was not given)."""
        return self._models.get(folder, ())

    def checks(self) -> dict[str, CustomCheck]:
        """VALIDATE_INPUTS stand-ins: the input loaders check this instance's disk."""
        return file_checks(self._dirs.exists_annotated)

    def current(self) -> Catalog:
        """The catalogue as `GET /object_info` shows it now."""
        folders = {**self._models, "input": self._dirs.input_files()}
        return with_file_lists(self._base, folders)

    def object_info_json(self) -> bytes:
        """The serialized `GET /object_info` body, rebuilt when the input directory changed."""
        files = tuple(self._dirs.input_files())
        if self._served is None or self._served[0] != files:
            body = json.dumps(dict(self.current().object_info)).encode("utf-8")
            self._served = (files, body)
        return self._served[1]

    def class_info(self, class_type: str) -> dict[str, Any]:
        """`GET /object_info/{class}`: `{class: info}`, or `{}` for an unknown class."""
        catalog = self.current()
        if class_type not in catalog:
            return {}
        return {class_type: dict(catalog.info(class_type))}
