"""Fixtures for the prompt-logic tests: the recorded catalogue and the recorded prompt."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from workers.comfy.catalog import Catalog

ROOT = Path(__file__).resolve().parents[4]
OBJECT_INFO = ROOT / "workers" / "emulator" / "data" / "object_info.json"
TRANSCRIPT = ROOT / "tests" / "contract" / "ws_transcript.json"


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.from_json_file(OBJECT_INFO)


@pytest.fixture(scope="session")
def transcript() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(TRANSCRIPT.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def txt2img(transcript: dict[str, Any]) -> dict[str, Any]:
    """The default graph exactly as the recorded run sent it (a fresh copy per test)."""
    prompt: dict[str, Any] = transcript["responses"]["queue_during"]["queue_running"][0][2]
    return copy.deepcopy(prompt)
