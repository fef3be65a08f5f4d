"""The ComfyUI contract through `comfy-gateway serve` in front of two real ComfyUI workers.

Needs a ComfyUI checkout (COMFY_GATEWAY_TEST_COMFYUI, its Python in
COMFY_GATEWAY_TEST_COMFYUI_PYTHON) with two checkpoints; the workers run on the CPU (`--cpu`),
so no GPU is needed. The contract suite runs in a child pytest with CONTRACT_TARGET=gateway:
its fixtures start the gateway with a config file of two [[workers]] entries (and a third
worker behind a second gateway for the checks that hold the queue).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CHECKOUT = os.environ.get("COMFY_GATEWAY_TEST_COMFYUI")
# ComfyUI on a few CPU cores: ~30 s to start each worker, a few seconds per checked prompt.
SUITE_TIMEOUT_S = 1800
CHECK_TIMEOUT_S = 600


@pytest.mark.comfyui
@pytest.mark.skipif(
    not CHECKOUT,
    reason="needs a ComfyUI checkout: set COMFY_GATEWAY_TEST_COMFYUI=/path/to/ComfyUI "
    "(and COMFY_GATEWAY_TEST_COMFYUI_PYTHON to the Python that runs it)",
)
@pytest.mark.timeout(SUITE_TIMEOUT_S + 60)
def test_the_contract_suite_passes_through_a_gateway_of_real_cpu_workers(
    tmp_path: Path,
) -> None:
    env = {key: value for key, value in os.environ.items() if key != "COMFYUI_URL"}
    env["CONTRACT_TARGET"] = "gateway"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/contract",
        "-q",
        "-rfEs",
        f"--basetemp={tmp_path}",
        f"--timeout={CHECK_TIMEOUT_S}",
    ]
    run = subprocess.run(
        argv,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
