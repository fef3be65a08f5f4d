"""`serve` with settings that cannot work here exits at once with the reason, before it
starts Redis or a worker (so nothing is left running and nothing half-started is reported)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from gateway.serve import serve_argv
from workers.supervision.ports import free_port

pytestmark = pytest.mark.timeout(60)


def serve(port: int, data_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = serve_argv(port, data_dir, *flags)
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (("--emulate-profile", "a100"), "emulated card: unknown profile 'a100'"),
        (("--comfyui", "/nonexistent", "--gpus", "0"), "/nonexistent is not a ComfyUI checkout"),
    ],
)
def test_a_farm_that_cannot_start_is_refused_before_anything_starts(
    tmp_path: Path, flags: tuple[str, ...], reason: str
) -> None:
    data_dir = tmp_path / "data"
    done = serve(free_port(), data_dir, *flags)
    assert done.returncode == 2, done.stderr
    assert f"cannot serve: {reason}" in done.stderr
    assert not (data_dir / "redis").exists() and not (data_dir / "workers").exists()


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(port, data_dir, "--emulate", "1")
    assert done.returncode == 2, done.stderr
    assert f"127.0.0.1:{port} is already in use" in done.stderr
    assert not (data_dir / "redis").exists() and not (data_dir / "workers").exists()


def test_a_bad_setting_names_its_field_and_value(tmp_path: Path) -> None:
    done = serve(free_port(), tmp_path / "data", "--time-scale", "-2")
    assert done.returncode == 2
    assert "bad settings: time_scale: Input should be greater than 0 (got -2.0)" in done.stderr
