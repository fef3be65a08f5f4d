"""The command line: ComfyUI's flags accepted, bad ones refused with exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.comfy.flags import CacheMode
from workers.emulator.cli import main, parse_config
from workers.emulator.config import DEFAULT_CHECKPOINTS, DEFAULT_MODELS


def dirs(tmp_path: Path) -> list[str]:
    return ["--base-directory", str(tmp_path)]


def test_comfyui_flags_reach_the_config(tmp_path: Path) -> None:
    argv = [
        "--port", "9001", "--time-scale", "0.01", "--listen", "--cache-lru", "8", "--lowvram",
        "--fp16-vae", "--preview-method", "auto", "--max-upload-size", "50", "--checkpoints",
        "a.safetensors, b.safetensors", "--fault", "slow_factor=2", *dirs(tmp_path),
    ]  # fmt: skip
    config, _ = parse_config(argv)
    assert config.port == 9001
    assert config.listen == ("0.0.0.0", "::")
    assert config.flags.cache_mode is CacheMode.LRU and config.flags.cache_lru_size == 8
    assert config.flags.preview_method == "auto"
    assert config.max_upload_bytes == 50 * 1024 * 1024
    assert config.checkpoints == ("a.safetensors", "b.safetensors")
    assert config.faults == {"slow_factor": 2}
    assert config.argv[0] == "main.py" and "--time-scale" not in config.argv
    assert "--lowvram" in config.argv and "--checkpoints" not in config.argv


def test_defaults(tmp_path: Path) -> None:
    config, _ = parse_config(dirs(tmp_path))
    assert (config.port, config.listen, config.checkpoints) == (
        8188,
        ("127.0.0.1",),
        DEFAULT_CHECKPOINTS,
    )
    assert config.profile.name == "h200"
    assert config.temp_dir == tmp_path / "temp"
    assert config.startup_delay_s == pytest.approx(config.profile.startup_s)


def test_model_folders_default_to_the_frontends_default_graph_files(tmp_path: Path) -> None:
    config, _ = parse_config(dirs(tmp_path))
    assert config.models == DEFAULT_MODELS
    assert config.model_files["diffusion_models"] == ("z_image_turbo_bf16.safetensors",)
    assert config.model_files["checkpoints"] == DEFAULT_CHECKPOINTS


def test_models_name_a_folders_files_legacy_names_included(tmp_path: Path) -> None:
    argv = ["--models", "unet=a.safetensors,b.gguf", "--models", "clip=t5.safetensors"]
    argv += [
        "--models",
        "vae=",
        "--models",
        "loras=x.safetensors",
        "--models",
        "checkpoints=c.ckpt",
    ]
    config, _ = parse_config([*argv, *dirs(tmp_path)])
    assert config.model_files == {
        "diffusion_models": ("a.safetensors", "b.gguf"),
        "text_encoders": ("t5.safetensors",),
        "vae": (),
        "loras": ("x.safetensors",),
        "checkpoints": ("c.ckpt",),
    }
    assert "--models" not in config.argv


def test_temp_directory_gets_a_temp_subfolder(tmp_path: Path) -> None:
    config, _ = parse_config([*dirs(tmp_path), "--temp-directory", str(tmp_path / "t")])
    assert config.temp_dir == tmp_path / "t" / "temp"


def test_model_folders_lie_under_the_base_directory(tmp_path: Path) -> None:
    config, _ = parse_config(dirs(tmp_path))
    assert config.base_path == str(tmp_path)
    argv = ["--temp-directory", str(tmp_path)]
    for flag, name in (("--output-directory", "output"), ("--input-directory", "input")):
        argv += [flag, str(tmp_path / "elsewhere" / name)]
    explicit, _ = parse_config(argv)
    assert explicit.base_dir is None
    assert explicit.base_path == str(tmp_path / "elsewhere")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["--lowvram", "--highvram"], "not allowed with argument"),
        (["--cache-lru", "4", "--cache-none"], "not allowed with argument"),
        (["--preview-method", "pretty"], "invalid choice"),
        (["--port", "x"], "invalid int value"),
        (["--profile", "no-such-card"], "no-such-card"),
        (["--fault", "explode=1"], "unknown fault keys: explode"),
        (["--time-scale", "0"], "must be > 0"),
        (["--models", "vae"], "expected FOLDER=a,b,..."),
        (["--models", "weights=a.safetensors"], "unknown model folder 'weights'"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main([*argv, *dirs(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--time-scale" in capsys.readouterr().out


def test_quick_test_for_ci_starts_nothing(tmp_path: Path) -> None:
    assert main(["--quick-test-for-ci", *dirs(tmp_path)]) == 0
