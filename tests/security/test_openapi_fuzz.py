"""Schemathesis over the gateway's own OpenAPI description: every route it documents, fuzzed
from its schema against `comfy-gateway serve` with emulated workers, answers without a server
error (authenticated, so the operator routes are fuzzed too). A fixed seed keeps CI
repeatable; `SCHEMATHESIS_SEED` and `SCHEMATHESIS_EXAMPLES` widen the search by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.farms import TOKEN, gateway_process, write_config

pytestmark = pytest.mark.timeout(300)


def test_no_documented_route_answers_a_server_error(redis_url: str, tmp_path: Path) -> None:
    pytest.importorskip("schemathesis")
    with gateway_process(
        write_config(tmp_path / "farm.toml", ["s0", "s1"]), redis_url, tmp_path / "node"
    ) as gw:
        argv = [
            sys.executable, "-m", "schemathesis.cli", "run", f"{gw.url}/gateway/openapi.json",
            "--checks", "not_a_server_error", "--phases", "examples,fuzzing",
            "-n", os.environ.get("SCHEMATHESIS_EXAMPLES", "6"),
            "--seed", os.environ.get("SCHEMATHESIS_SEED", "1"),
            "--request-timeout", "15", "-H", f"Authorization: Bearer {TOKEN}",
        ]  # fmt: skip
        run = subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=280, cwd=tmp_path
        )
        alive = gw.process.poll() is None
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert alive, f"the gateway died under fuzzing:\n{gw.log()[-4000:]}"
    assert run.returncode == 0, report
    assert " passed" in run.stdout, report
