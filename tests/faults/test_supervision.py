"""Supervision under faults, with real processes: the gateway, its emulated ComfyUI workers,
Redis. Each test asserts what a client sees: every job completes exactly once, the broken
worker comes back (or is marked failed and the rest keeps serving)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.faults.farms import (
    AUTH,
    TOKEN,
    Farm,
    emulated,
    farm_client,
    farm_settings,
    gateway_process,
    supervised_gateway,
    wait_gone,
    write_config,
)
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, started_emulators, txt2img
from tests.waiting import rounds_pass
from workers.supervision.launch import FarmLayout

NO_AUTH = {"Authorization": ""}
"""Overrides the farm client's token: a request as a caller without it makes."""

pytestmark = pytest.mark.timeout(60)

LONG = {"steps": 2000, "size": 512}
"""About a second of sampling at time scale 0.01 (sd15 on the rtx4070ti profile)."""
LONGER = {"steps": 8000, "size": 512}


async def _until_sampling(client: ComfyStyleClient, prompt_id: str) -> None:
    for _ in range(400):
        if "progress" in client.events_of(prompt_id):
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"{prompt_id} never sampled")


def _finished_once(client: ComfyStyleClient, prompt_id: str) -> bool:
    ends = [
        e for e in client.events
        if e["type"] == "executing" and e["data"] == {"node": None, "prompt_id": prompt_id}
    ]  # fmt: skip
    return len(ends) == 1


async def _serves(farm: Farm, client: ComfyStyleClient, seed: int) -> str:
    """The farm still runs a job to success; returns the worker that ran it."""
    prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "alive", seed=seed))
    entry = await client.wait(prompt_id, timeout_s=20)
    assert entry["status"]["status_str"] == "success"
    worker: str = (await farm.job(prompt_id))["worker"]
    return worker


async def test_a_worker_killed_during_sampling_comes_back_and_its_job_completes_once(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("a"), emulated("b")])
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "k", **LONG))
        await _until_sampling(client, prompt_id)
        victim = (await farm.job(prompt_id))["worker"]
        old_pid = (await farm.worker(victim))["pid"]
        os.kill(old_pid, signal.SIGKILL)
        entry = await client.wait(prompt_id, timeout_s=30)
        assert entry["status"]["status_str"] == "success"
        assert _finished_once(client, prompt_id)
        attempts = (await farm.job(prompt_id))["attempts"]
        assert attempts[0]["worker"] == victim
        assert len(attempts) == 2
        back = await farm.until_worker(victim, state="ready", restarts=1)
        assert back["pid"] not in (None, old_pid)
        assert back["last_exit"] == "killed by SIGKILL"
        await _serves(farm, client, seed=2)


async def test_a_worker_that_exits_at_start_is_failed_with_its_log_and_the_farm_serves(
    redis_url: str, tmp_path: Path
) -> None:
    broken = emulated("broken", args=("--no-such-flag",))
    settings = farm_settings(redis_url, tmp_path, [emulated("good"), broken])
    async with supervised_gateway(settings) as farm:
        record = await farm.until_worker("broken", state="failed")
        assert "broken at start" in record["reason"]
        assert record["restarts"] == 1  # tried twice (max_start_failures), then gave up
        assert any("--no-such-flag" in line for line in record["log_tail"])
        # Ten rounds of 0.05 s outlast the longest backoff (0.2 s) a restart would wait out.
        await rounds_pass(lambda: farm.supervisor.rounds, count=10)
        assert (await farm.worker("broken"))["restarts"] == 1, "restarted after giving up"
        async with farm_client(farm) as client:
            assert await _serves(farm, client, seed=3) == "good"
            assert (await farm.http.get("/readyz")).status_code == 200


async def test_a_flapping_worker_is_failed_until_an_operator_resumes_it(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("steady"), emulated("flappy")])
    async with supervised_gateway(settings) as farm:
        for restarts in range(3):
            record = await farm.until_worker("flappy", state="ready", restarts=restarts)
            os.kill(record["pid"], signal.SIGKILL)
        failed = await farm.until_worker("flappy", state="failed")
        assert "flapping: 3 exits" in failed["reason"]
        async with farm_client(farm) as client:
            assert await _serves(farm, client, seed=4) == "steady"
            refused = await farm.http.post("/gateway/workers/flappy/resume", headers=NO_AUTH)
            assert refused.status_code == 401
            resumed = await farm.http.post("/gateway/workers/flappy/resume", headers=AUTH)
            assert resumed.json()["started"] is True
            await farm.until_worker("flappy", state="ready", restarts=3)


async def test_a_silent_websocket_is_recovered_from_history_once(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("quiet")], stall_timeout_s=0.5)
    async with supervised_gateway(settings) as farm:
        worker_url = (await farm.worker("quiet"))["url"]
        async with httpx.AsyncClient() as http:
            armed = await http.post(worker_url + "/emulator/faults", json={"stall_ws_s": 8})
            assert armed.status_code == 200, armed.text
        async with farm_client(farm) as client:
            started = time.monotonic()
            prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "q", seed=5))
            entry = await client.wait(prompt_id, timeout_s=6)
            assert time.monotonic() - started < 6, "waited for the socket, not the watchdog"
            assert entry["status"]["status_str"] == "success"
            assert len((await farm.job(prompt_id))["attempts"]) == 1
            assert _finished_once(client, prompt_id)
            assert (await farm.worker("quiet"))["restarts"] == 0


async def test_a_hung_worker_is_interrupted_restarted_and_its_job_runs_again_once(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("stuck")], stall_timeout_s=0.5)
    async with supervised_gateway(settings) as farm:
        before = await farm.worker("stuck")
        async with httpx.AsyncClient() as http:
            armed = await http.post(before["url"] + "/emulator/faults", json={"hang_s": 30})
            assert armed.status_code == 200, armed.text
        async with farm_client(farm) as client:
            prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "h", seed=6, steps=5))
            entry = await client.wait(prompt_id, timeout_s=20)
            assert entry["status"]["status_str"] == "success"
            assert _finished_once(client, prompt_id)
            job = await farm.job(prompt_id)
            assert len(job["attempts"]) == 2
            assert job["failures"] == 1
            after = await farm.until_worker("stuck", state="ready", restarts=1)
            assert after["pid"] != before["pid"]


async def test_a_worker_slow_past_its_start_deadline_is_failed_and_the_farm_serves(
    redis_url: str, tmp_path: Path
) -> None:
    layout = FarmLayout(tmp_path / "external", tmp_path / "input", 0.01)
    with started_emulators(layout, ["good"]) as good:
        slow = emulated("slow", args=("--startup-s", "60"))
        external = emulated("good", url=good[0].url)
        settings = farm_settings(redis_url, tmp_path, [external, slow], worker_start_timeout_s=0.5)
        async with supervised_gateway(settings) as farm:
            record = await farm.until_worker("slow", state="failed")
            assert "not ready after 0.5 s" in record["reason"]
            assert record["pid"] is None, "the slow child was not stopped"
            async with farm_client(farm) as client:
                assert await _serves(farm, client, seed=7) == "good"


async def test_an_operator_restarts_drains_and_resumes_a_worker(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("a")], prefetch=0)
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "op", **LONG))
        await _until_sampling(client, prompt_id)
        old_pid = (await farm.worker("a"))["pid"]
        refused = await farm.http.post("/gateway/workers/a/restart", headers=NO_AUTH)
        assert refused.status_code == 401
        restarted = await farm.http.post("/gateway/workers/a/restart", headers=AUTH)
        assert restarted.status_code == 200, restarted.text
        entry = await client.wait(prompt_id, timeout_s=30)
        assert entry["status"]["status_str"] == "success"
        assert _finished_once(client, prompt_id)
        job = await farm.job(prompt_id)
        assert (len(job["attempts"]), job["failures"]) == (2, 0)
        back = await farm.until_worker("a", state="ready", restarts=1)
        assert back["pid"] != old_pid
        assert back["telemetry"]["available"] is False  # no NVIDIA hardware here, said plainly
        metrics = (await farm.http.get("/metrics")).text
        assert 'comfy_gateway_worker_restarts_total{worker="a"} 1.0' in metrics
        assert 'comfy_gateway_worker_state{state="ready",worker="a"} 1.0' in metrics
        assert "comfy_gateway_gpu_telemetry_available 0.0" in metrics
        drained = await farm.http.post("/gateway/workers/a/drain", headers=AUTH)
        assert drained.json()["draining"] is True
        waiting = await client.queue_prompt(txt2img(CHECKPOINTS[0], "wait", seed=8))
        assert farm.dispatcher is not None
        await rounds_pass(lambda: farm.dispatcher.rounds if farm.dispatcher else 0)
        assert (await farm.job(waiting))["state"] == "pending"
        assert (await farm.http.get("/readyz")).status_code == 503
        await farm.http.post("/gateway/workers/a/resume", headers=AUTH)
        assert (await client.wait(waiting))["status"]["status_str"] == "success"


async def test_sigterm_drains_running_jobs_and_returns_the_rest_to_the_queue(
    redis_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "farm.toml", ["w0", "w1"], drain_grace_s=15.0)
    with gateway_process(config, redis_url, tmp_path / "node1") as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10, headers=AUTH) as http:
            client = ComfyStyleClient(gateway.url, token=TOKEN)
            ids = [
                await client.queue_prompt(txt2img(CHECKPOINTS[0], "d", seed=j, **LONG))
                for j in range(6)
            ]
            pids = [w["pid"] for w in (await http.get("/gateway/workers")).json()["workers"]]
            farm = Farm(gateway.url, None, http)  # type: ignore[arg-type]
            running = [await farm.until_job(i, "running") for i in ids[:2]]
            gateway.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            assert (await http.get("/readyz")).status_code == 503
            refused = await client.post(txt2img(CHECKPOINTS[0], "late", seed=99))
            assert refused.status_code == 503
            assert refused.headers["retry-after"]
            await client.http.aclose()
        assert await asyncio.to_thread(gateway.process.wait, 30) == 0, gateway.log()
    assert wait_gone(pids) == [], "a worker outlived the gateway"
    settings = farm_settings(redis_url, tmp_path / "node2", [emulated("w0"), emulated("w1")])
    async with supervised_gateway(settings) as farm:
        first = {r["prompt_id"]: (await farm.job(r["prompt_id"])) for r in running}
        assert all(job["state"] == "success" for job in first.values()), first
        assert all(len(job["attempts"]) == 1 for job in first.values())
        for job_id in ids:
            done = await farm.until_job(job_id, "success", timeout_s=30)
            assert done["failures"] == 0
        history = (await farm.http.get("/history")).json()
        assert sorted(history) == sorted(ids)
