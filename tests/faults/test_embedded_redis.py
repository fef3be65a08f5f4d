"""The embedded Redis is supervised like a worker: killed, it is restarted on the same AOF
(an accepted job survives and runs), the gateway serves again, and /healthz and /readyz say
what happened (they answered 200 while every request got 503, forever)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from gateway.serve import serve_argv
from tests.faults.farms import FAST
from tests.integration.conftest import CHECKPOINTS, txt2img
from workers.supervision.ports import free_port

pytestmark = pytest.mark.timeout(60)


def _config(path: Path) -> Path:
    checkpoints = ", ".join(f'"{c}"' for c in CHECKPOINTS)
    lines = [f"time_scale = {FAST['time_scale']}", "supervise_interval_s = 0.05", "[restart]"]
    lines += [f"{k} = {v}" for k, v in FAST["restart"].items()]
    lines += [
        "[[workers]]",
        'name = "r0"',
        'emulate = "rtx4070ti"',
        f"checkpoints = [{checkpoints}]",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _redis_pid(gateway_pid: int) -> int:
    for task in Path(f"/proc/{gateway_pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            if b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise AssertionError("no redis-server child")


def _until(http: httpx.Client, check: object, timeout_s: float = 20) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = check(http)  # type: ignore[operator]
            if answer is not None:
                return answer  # type: ignore[no-any-return]
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_embedded_redis_is_restarted_and_its_jobs_kept(tmp_path: Path) -> None:
    port = free_port()
    argv = serve_argv(port, tmp_path / "data", config=_config(tmp_path / "f.toml"))
    with (tmp_path / "gateway.log").open("wb") as out:
        gateway = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            _until(http, lambda h: r if (r := h.get("/readyz")).status_code == 200 else None)
            before = http.post("/prompt", json={"prompt": txt2img(CHECKPOINTS[0], "kept")})
            assert before.status_code == 200, before.text
            time.sleep(1.2)  # past the AOF's one-second fsync
            os.kill(_redis_pid(gateway.pid), signal.SIGKILL)
            body = {"prompt": txt2img(CHECKPOINTS[0], "after", seed=2)}
            after = _until(
                http,
                lambda h: r if (r := h.post("/prompt", json=body)).status_code == 200 else None,
            )
            health = http.get("/healthz")
            assert health.status_code == 200
            assert health.json()["redis"]["restarts"] == 1
            for job_id in (before.json()["prompt_id"], after.json()["prompt_id"]):
                _until(
                    http,
                    lambda h, i=job_id: (
                        r
                        if (r := h.get(f"/gateway/jobs/{i}")).json().get("state") == "success"
                        else None
                    ),
                )
    finally:
        gateway.send_signal(signal.SIGKILL)
        gateway.wait()
