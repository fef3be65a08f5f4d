"""Prompts ComfyUI itself chokes on are told apart from ones it refuses politely."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.workers.emulator.running import txt2img
from workers.emulator.catalog import NodeCatalog
from workers.emulator.execution.admission import MalformedPrompt, check_structure, validate
from workers.emulator.files import Dirs


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> NodeCatalog:
    root = tmp_path_factory.mktemp("admission")
    dirs = Dirs.create(root / "in", root / "out", root / "tmp")
    return NodeCatalog.load({"checkpoints": ["A.safetensors"]}, dirs)


@pytest.mark.parametrize(
    "prompt",
    [
        None,
        5,
        "x",
        ["a"],
        {"1": 5},
        {"1": None},
        {"1": "has class_type"},
        {"1": {"class_type": ["x"]}},
    ],
)
def test_comfyui_crashes_on(catalog: NodeCatalog, prompt: Any) -> None:
    with pytest.raises(MalformedPrompt):
        check_structure(prompt, catalog)


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        ([], "prompt_no_outputs"),
        ({}, "prompt_no_outputs"),
        ({"1": "text"}, "invalid_prompt"),
        ({"1": {"inputs": {}}, "2": 5}, "invalid_prompt"),  # stops at the first bad node
        ({"1": {"class_type": "Nope"}, "2": None}, "invalid_prompt"),
    ],
)
def test_comfyui_refuses_politely(catalog: NodeCatalog, prompt: Any, error: str) -> None:
    result = validate(prompt, None, catalog, inject_failure=False)
    assert not result.ok
    assert result.error is not None and result.error["type"] == error


def test_an_injected_failure_names_the_first_output(catalog: NodeCatalog) -> None:
    prompt = txt2img()
    result = validate(prompt, None, catalog, inject_failure=True)
    assert not result.ok
    assert list(result.node_errors) == ["9"]
    assert validate(prompt, None, catalog, inject_failure=False).ok
