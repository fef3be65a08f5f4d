"""Every node class of the recorded catalogue runs, whatever it is.

For each class a prompt is built from defaults: constants from the declared defaults (first
combo option), each linked input fed by some class that makes that type from constants alone,
and a PreviewImage / PreviewAny after it when it is not an output node itself. Prompts that
validate (about 180 of 472 classes; the others need files this instance does not have, such
as LoRAs) must run to `success`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.unit.workers.emulator.conftest import history_entry

pytestmark = pytest.mark.timeout(60)

OBJECT_INFO: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[4] / "workers/emulator/data/object_info.json").read_text()
)
LINK = object()


def default_of(spec: list[Any]) -> Any:
    """A constant for a declared input, LINK for a linked type, None when there is none."""
    kind = spec[0]
    config = spec[1] if len(spec) > 1 and isinstance(spec[1], Mapping) else {}
    if isinstance(kind, list):
        return kind[0] if kind else None
    if kind == "COMBO":
        options = config.get("options") or [None]
        return options[0]
    defaults = {"INT": 0, "FLOAT": 0.0, "STRING": "x", "BOOLEAN": False}
    if kind in defaults:
        return config.get("default", config.get("min", defaults[kind]))
    return LINK


def providers() -> dict[str, tuple[str, int]]:
    """For each type, a class that makes it from constants only, and the output index."""
    found: dict[str, tuple[str, int]] = {}
    for name, entry in OBJECT_INFO.items():
        required = entry["input"].get("required", {}).values()
        if all(default_of(spec) not in (LINK, None) for spec in required):
            for index, kind in enumerate(entry["output"]):
                found.setdefault(str(kind), (name, index))
    return found


class Builder:
    def __init__(self) -> None:
        self.prompt: dict[str, Any] = {}
        self.sources = providers()

    def add(self, class_type: str, inputs: dict[str, Any]) -> str:
        node_id = str(len(self.prompt) + 1)
        self.prompt[node_id] = {"class_type": class_type, "inputs": inputs}
        return node_id

    def node(self, class_type: str, depth: int = 0) -> str | None:
        inputs: dict[str, Any] = {}
        for name, spec in OBJECT_INFO[class_type]["input"].get("required", {}).items():
            value = default_of(spec)
            if value is LINK:
                value = self.link(str(spec[0]), depth)
            if value is None:
                return None
            inputs[name] = value
        return self.add(class_type, inputs)

    def link(self, kind: str, depth: int) -> list[Any] | None:
        if kind not in self.sources or depth > 8:
            return None
        source, index = self.sources[kind]
        node_id = self.node(source, depth + 1)
        return None if node_id is None else [node_id, index]


def prompt_for(class_type: str) -> dict[str, Any] | None:
    builder = Builder()
    top = builder.node(class_type)
    if top is None:
        return None
    entry = OBJECT_INFO[class_type]
    if not entry["output_node"]:
        outputs = [str(kind) for kind in entry["output"]]
        if "IMAGE" in outputs:
            builder.add("PreviewImage", {"images": [top, outputs.index("IMAGE")]})
        else:
            builder.add("PreviewAny", {"source": [top, 0]})
    return builder.prompt


async def test_every_class_that_validates_runs_to_success(client: httpx.AsyncClient) -> None:
    ran, failed = [], []
    for class_type in OBJECT_INFO:
        prompt = prompt_for(class_type)
        if prompt is None:
            continue
        response = await client.post("/prompt", json={"prompt": prompt})
        if response.status_code != 200:
            continue
        entry = await history_entry(client, response.json()["prompt_id"])
        ran.append(class_type)
        if entry["status"]["status_str"] != "success":
            failed.append((class_type, entry["status"]["messages"][-1]))
    assert len(ran) > 150
    assert failed == []
