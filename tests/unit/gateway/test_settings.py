"""Settings: TOML < environment < flags, and which farm they describe."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.serve import load_settings
from gateway.settings import Settings, resolve_workers

CONFIG = """
port = 9000
policy = "round_robin"

[[workers]]
name = "gpu0"
gpu = 0
group = "baseline"

[[workers]]
name = "sim1"
emulate = "rtx4070ti"
checkpoints = ["sd15_a.safetensors", "sdxl_b.safetensors"]
args = ["--fp16-vae"]
group = "fp16vae"
"""


def test_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "farm.toml"
    config.write_text(CONFIG)
    monkeypatch.setenv("COMFY_GATEWAY_PORT", "9100")
    monkeypatch.setenv("COMFY_GATEWAY_POLICY", "sticky")
    settings = load_settings(["--config", str(config), "--policy", "least_outstanding"])
    assert settings.port == 9100
    assert settings.policy == "least_outstanding"
    assert [w.name for w in settings.workers] == ["gpu0", "sim1"]
    assert settings.workers[1].args == ("--fp16-vae",)
    assert settings.workers[1].emulated


def test_no_workers_and_no_comfyui_means_two_emulated_workers() -> None:
    farm = resolve_workers(Settings(), visible_gpus=(0, 1, 2))
    assert [(w.name, w.emulated) for w in farm] == [("sim0", True), ("sim1", True)]


def test_comfyui_without_a_worker_list_means_one_worker_per_gpu(tmp_path: Path) -> None:
    farm = resolve_workers(Settings(comfyui=tmp_path), visible_gpus=(0, 1))
    assert [(w.name, w.gpu, w.comfyui) for w in farm] == [
        ("gpu0", 0, tmp_path),
        ("gpu1", 1, tmp_path),
    ]
    assert len(resolve_workers(Settings(comfyui=tmp_path, gpus="3"), visible_gpus=(0,))) == 1


def test_explicit_emulate_count_wins() -> None:
    assert len(resolve_workers(Settings(emulate=4), visible_gpus=())) == 4


def test_redis_url_from_the_plain_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/2")
    assert Settings().redis_url == "redis://elsewhere:6379/2"


def test_bad_worker_names_and_duplicates_are_refused() -> None:
    with pytest.raises(ValueError, match="must match"):
        Settings(workers=[{"name": "../x"}])
    with pytest.raises(ValueError, match="duplicate"):
        Settings(workers=[{"name": "a"}, {"name": "a"}])
