"""A real worker's launch args are planned from its card as NVML read it at `serve`: the first
card (GPU 0) included, whether the farm file writes `gpu = 0` or `gpu = "0"`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.farm.describe import telemetry_fields
from gateway.serve import load_settings, make_supervisor
from gateway.settings import resolve_workers
from tests.unit.workers.test_telemetry import FakeGpu, FakeNvml, opened
from workers.comfy.launch_args import plan_launch
from workers.supervision.launch import FarmLayout, WorkerSpec

H200_MIB = 143771


@pytest.mark.parametrize(("gpu", "indices"), [(0, (0,)), ("0", (0,)), (1, (1,)), ("0,1", (0, 1))])
def test_a_slot_names_its_gpus_gpu_zero_included(gpu: int | str, indices: tuple[int, ...]) -> None:
    assert WorkerSpec(name="w", gpu=gpu).gpu_indices == indices


@pytest.mark.parametrize("written", ["0", '"0"'])
def test_two_workers_on_gpu_zero_get_the_big_card_defaults(tmp_path: Path, written: str) -> None:
    config = tmp_path / "farm.toml"
    workers = "".join(f'[[workers]]\nname = "w{i}"\ngpu = {written}\n\n' for i in range(2))
    config.write_text(workers)
    settings = load_settings(["--config", str(config), "--comfyui", str(tmp_path)])
    telemetry = opened(FakeNvml([FakeGpu(total_mib=H200_MIB)]))
    telemetry.sample()
    layout = FarmLayout(tmp_path / "workers", tmp_path / "input")

    supervisor = make_supervisor(
        settings, resolve_workers(settings, ()), layout, telemetry, os.environ
    )

    for spec in supervisor.specs:
        assert supervisor.vram_of(spec) == pytest.approx(H200_MIB)
        assert "--cache-lru" in plan_launch(spec.args, supervisor.vram_of(spec)).args
        shown = telemetry_fields(telemetry.snapshot(), spec.gpu_indices)
        assert [gpu["memory_total_mib"] for gpu in shown["gpus"]] == [H200_MIB]
