"""The farm's node catalogue: the merged object_info of the workers, and prompt checks on it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workers.comfy import Catalog, Validation, validate_prompt
from workers.comfy.checks import file_checks
from workers.comfy.workflow import capable_sources, checkpoint, model_keys, work_units

SHARED_INPUTS = (("LoadImage", "image"), ("LoadImageMask", "image"))


class FarmCatalog:
    """What every worker offers, merged; `input_dir` is the input folder all workers share."""

    def __init__(self, input_dir: Path | None):
        self.input_dir = input_dir
        self.catalog = Catalog.merge({})
        self.object_info_json = b"{}"
        self._checks = file_checks(self._input_exists) if input_dir is not None else None
        self._local: dict[str, Catalog] = {}
        self._remote: dict[str, Catalog] = {}

    def update(self, object_infos: Mapping[str, Mapping[str, Any]]) -> None:
        """Rebuild from each worker's object_info, by worker name."""
        self._local = {name: Catalog.from_object_info(info) for name, info in object_infos.items()}
        self._merge()

    def update_remote(self, object_infos: Mapping[str, Mapping[str, Any]]) -> None:
        """The workers of the other live nodes (`gateway.peers`), by worker name; this node's
        own keep their own catalogue where a name is in both."""
        self._remote = {name: Catalog.from_object_info(info) for name, info in object_infos.items()}
        self._merge()

    def _merge(self) -> None:
        self.catalog = Catalog.merge({**self._remote, **self._local})
        self.object_info_json = json.dumps(self.catalog.object_info).encode()

    @property
    def empty(self) -> bool:
        return not self.catalog.object_info

    def class_info(self, class_type: str) -> Mapping[str, Any] | None:
        return self.catalog.object_info.get(class_type)

    def validate(self, prompt: object, targets: Sequence[str] | None) -> Validation:
        return validate_prompt(prompt, self.catalog, targets, custom_checks=self._checks)

    def capable(self, prompt: Mapping[str, Any], outputs: Sequence[str]) -> frozenset[str]:
        """Workers able to run the prompt (classes known, listed files present)."""
        ignore = SHARED_INPUTS if self.input_dir is not None else ()
        return capable_sources(prompt, self.catalog, outputs, ignore_inputs=ignore)

    def placement_facts(
        self, prompt: Mapping[str, Any]
    ) -> tuple[str | None, tuple[str, ...], float]:
        """(checkpoint, model keys, work units) of a validated prompt."""
        keys = tuple(sorted(model_keys(prompt, self.catalog)))
        return checkpoint(prompt), keys, work_units(prompt)

    def _input_exists(self, name: str) -> bool:
        if name.endswith((" [output]", " [temp]")):
            return True  # another worker's folder: the worker that runs it checks again
        name = name.removesuffix(" [input]")
        assert self.input_dir is not None
        path = (self.input_dir / name).resolve()
        root = self.input_dir.resolve()
        return path.is_relative_to(root) and path.is_file()
