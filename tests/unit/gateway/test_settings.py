"""Settings: TOML < environment < flags, and which farm they describe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.serve import load_settings, validation_errors
from gateway.settings import Settings, WorkerConfig, resolve_workers
from workers.supervision.launch import FarmLayout, WorkerSpec, emulator_argv

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


def test_exclusive_comfyui_flags_in_one_workers_args_are_refused_at_start() -> None:
    with pytest.raises(ValueError, match=r"worker gpu0: .*--lowvram.*--highvram"):
        Settings(workers=[{"name": "gpu0", "gpu": 0, "args": ["--lowvram", "--highvram"]}])
    with pytest.raises(ValueError, match="the gateway sets this"):
        Settings(workers=[{"name": "gpu0", "gpu": 0, "args": ["--port", "1"]}])
    emulated = {"name": "s", "emulate": "h200", "args": ["--startup-s", "3", "--fp16-vae"]}
    assert Settings(workers=[emulated]).workers[0].args == ("--startup-s", "3", "--fp16-vae")


def test_a_slot_may_hold_several_gpus(tmp_path: Path) -> None:
    farm = resolve_workers(Settings(comfyui=tmp_path, gpus="0+1,2"), visible_gpus=())
    assert [(w.name, w.gpu) for w in farm] == [("gpu0_1", "0,1"), ("gpu2", 2)]
    assert Settings(workers=[{"name": "w", "gpu": "3+4"}]).workers[0].gpu == "3,4"
    with pytest.raises(ValueError, match="twice"):
        Settings(gpus="1+1")


def test_preload_is_per_worker_with_a_farm_default(tmp_path: Path) -> None:
    settings = Settings(
        preload="a.safetensors,b.safetensors",
        workers=[{"name": "x", "emulate": "h200"}, {"name": "y", "gpu": 0, "preload": []}],
    )
    farm = resolve_workers(settings, visible_gpus=())
    assert [w.preload for w in farm] == [("a.safetensors", "b.safetensors"), ()]


def test_restart_settings_are_checked_and_reach_the_supervisor(tmp_path: Path) -> None:
    config = tmp_path / "farm.toml"
    config.write_text("[restart]\nbackoff_initial_s = 0.5\nflap_exits = 4\n")
    supervision = load_settings(["--config", str(config)]).supervision()
    assert supervision.restart.backoff_initial_s == 0.5
    assert supervision.restart.flap_exits == 4
    with pytest.raises(ValueError, match="backoff_factor"):
        Settings(restart={"backoff_factor": 0.5})


def test_the_warm_up_probe_steps_reach_the_supervisor_and_may_be_turned_off() -> None:
    assert Settings().supervision().warmup_probe_steps == 10
    assert Settings(warmup_probe_steps=4).supervision().warmup_probe_steps == 4
    assert Settings(warmup_probe_steps=0).supervision().warmup_probe_steps == 0
    with pytest.raises(
        ValueError, match=r"warmup_probe_steps must be 0 \(no speed probe\) or more"
    ):
        Settings(warmup_probe_steps=-1)


def test_emulated_model_folders_reach_the_emulators_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "farm.toml"
    worker = '[[workers]]\nname = "sim9"\nemulate = "h200"\n'
    config.write_text(f'{worker}models = {{ unet = ["z.safetensors"], loras = [] }}\n')
    settings = load_settings(["--config", str(config)])
    assert settings.workers[0].models == {"diffusion_models": ("z.safetensors",), "loras": ()}
    argv = emulator_argv(settings.workers[0].spec(), 8190, FarmLayout(tmp_path, tmp_path / "i"))
    assert argv[argv.index("--models") :][:4] == [
        "--models",
        "diffusion_models=z.safetensors",
        "--models",
        "loras=",
    ]
    monkeypatch.setenv("COMFY_GATEWAY_EMULATE_MODELS", '{"clip": ["t5.safetensors"]}')
    farm = resolve_workers(Settings(), visible_gpus=())
    assert [w.models for w in farm] == [{"text_encoders": ("t5.safetensors",)}] * 2


def test_an_unknown_model_folder_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="unknown model folder 'weights'"):
        Settings(emulate_models={"weights": ["a.safetensors"]})
    with pytest.raises(ValueError, match="unknown model folder 'weights'"):
        Settings(workers=[{"name": "s", "emulate": "h200", "models": {"weights": []}}])


def test_a_worker_config_has_the_fields_of_a_worker_spec_and_no_other() -> None:
    assert list(WorkerConfig.model_fields) == [f.name for f in dataclasses.fields(WorkerSpec)]


def test_a_worker_config_becomes_the_spec_with_its_models_as_pairs_and_no_preload() -> None:
    config = WorkerConfig(
        name="e0", group="g", gpu="0,1", emulate="h200", checkpoints=("a.safetensors",),
        models={"vae": ("ae.safetensors",)}, port=8190, args=("--startup-s", "0"),
    )  # fmt: skip
    assert config.spec() == WorkerSpec(
        name="e0", group="g", gpu="0,1", emulate="h200", checkpoints=("a.safetensors",),
        models=(("vae", ("ae.safetensors",)),), port=8190, args=("--startup-s", "0"),
    )  # fmt: skip
    assert WorkerConfig(name="e1", preload=("a",)).spec().preload == ("a",)


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--port", "99999"], "port: Input should be less than or equal to 65535"),
        (["--port", "-1"], "port: Input should be greater than or equal to 0"),
        (["--emulate", "0"], "emulate: Input should be greater than or equal to 1"),
        (["--time-scale", "0"], "time_scale: Input should be greater than 0"),
        (["--policy", "nope"], "policy: unknown policy 'nope'; known: affinity, "),
        (["--log-level", "loud"], "log_level: unknown log level 'loud'; known: debug, "),
        (["--gpus", "0,1"], "gpus names the GPU slots of real ComfyUI workers"),
        (["--emulate", "2", "--gpus", "0"], "gpus names the GPU slots of real ComfyUI workers"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_the_field_and_the_reason(
    flags: list[str], reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        load_settings(flags)
    assert validation_errors(caught.value).startswith(reason)


def test_the_log_level_is_read_in_any_case_and_a_known_policy_is_kept() -> None:
    settings = load_settings(["--log-level", "WARNING", "--policy", "swarm_like"])
    assert (settings.log_level, settings.policy) == ("warning", "swarm_like")
    assert load_settings(["--port", "0"]).port == 0
