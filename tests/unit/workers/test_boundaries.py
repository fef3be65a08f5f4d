"""Production code stands on its own: the gateway and the supervisor never import the emulator
(a fake of ComfyUI), and still know what an emulated card claims."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workers.supervision.launch import WorkerSpec
from workers.supervision.supervisor import emulated_vram

PRODUCTION = ("gateway.serve", "gateway.app", "gateway.settings", "gateway.ledger.tune")


def test_starting_the_gateway_imports_nothing_of_the_emulator() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {PRODUCTION!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] == ['workers', 'emulator']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_an_emulated_worker_claims_its_shipped_profiles_vram() -> None:
    vram_mib = emulated_vram(WorkerSpec("w", emulate="h200"))
    assert vram_mib is not None and 140_000 < vram_mib < 145_000


def test_an_emulated_worker_claims_the_vram_of_a_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps({"vram_total_mib": 24_000}))
    assert emulated_vram(WorkerSpec("w", emulate=str(path))) == 24_000


@pytest.mark.parametrize("emulate", ["no-such-card", "/nowhere/card.json", None])
def test_no_vram_is_claimed_without_a_readable_profile(emulate: str | None) -> None:
    assert emulated_vram(WorkerSpec("w", emulate=emulate)) is None
