"""One gateway per data dir: a second `serve` on it exits at once, naming the dir and the
holder; the lock of a gateway killed with SIGKILL does not block the next one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from gateway.serve import serve_argv
from tests.faults.farms import gateway_process
from tests.integration.conftest import CHECKPOINTS
from workers.supervision.ports import free_port

pytestmark = pytest.mark.timeout(60)


def _config(path: Path) -> Path:
    checkpoints = ", ".join(f'"{c}"' for c in CHECKPOINTS)
    path.write_text(
        "time_scale = 0.01\n"
        "worker_start_timeout_s = 20.0\n"
        "[[workers]]\n"
        'name = "locked0"\n'
        'emulate = "rtx4070ti"\n'
        'args = ["--startup-s", "0"]\n'
        f"checkpoints = [{checkpoints}]\n"
    )
    return path


def _second_serve(config: Path, redis_url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = serve_argv(free_port(), data_dir, "--redis-url", redis_url, config=config)
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=10)


def test_a_second_serve_on_the_same_data_dir_exits_at_once_naming_the_dir_and_holder(
    redis_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path / "farm.toml")
    data_dir = tmp_path / "data"
    with gateway_process(config, redis_url, data_dir) as first:
        second = _second_serve(config, redis_url, data_dir)
        assert second.returncode == 1, second.stderr
        assert str(data_dir.resolve()) in second.stderr
        assert f"pid {first.process.pid}" in second.stderr
        assert httpx.get(first.url + "/readyz", timeout=5).status_code == 200
        assert first.process.poll() is None


def test_the_lock_of_a_killed_gateway_does_not_block_the_next_one(
    redis_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path / "farm.toml")
    data_dir = tmp_path / "data"
    with gateway_process(config, redis_url, data_dir) as killed:
        pass  # leaving the block kills it with SIGKILL: no cleanup of its lock file
    assert killed.process.returncode == -9
    with gateway_process(config, redis_url, data_dir) as next_one:
        holder = (data_dir / "gateway.lock").read_text().strip()
        assert holder == str(next_one.process.pid)
