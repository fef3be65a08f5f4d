"""A hung worker (SIGSTOP: its kernel still accepts connections, nothing answers), with real
processes: it leaves the ready set at once and is back when continued, farm-wide routes never
wait for it, a hang while holding a job is restarted within seconds, and SIGTERM of the gateway
ends within the drain and stop budget it promises."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.farms import (
    AUTH,
    Farm,
    emulated,
    farm_settings,
    gateway_process,
    supervised_gateway,
    wait_gone,
    write_config,
)
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(60)

QUICK: dict[str, Any] = {"liveness_interval_s": 0.1, "liveness_timeout_s": 0.3, "auth_token": None}
"""Liveness on a test's scale: a probe every 0.1 s, unanswered after 0.3 s (and no token:
auth is not what is tested here)."""
LONG = {"steps": 2000, "size": 512}
"""About a second of sampling at time scale 0.01."""
SLOW = {"steps": 600, "size": 512}
"""About 6 s of sampling at time scale 0.2, in few events (thousands would load 2 cores)."""
FARM_ROUTES = ["/system_stats", "/models", "/features", "/embeddings", "/extensions"]


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process is stopped (SIGSTOP) inside the block, continued after it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[ComfyStyleClient]:
    client = ComfyStyleClient(url)
    await client.open()
    try:
        yield client
    finally:
        await client.close()


async def _timed_get(http: httpx.AsyncClient, path: str) -> tuple[int, float]:
    started = time.monotonic()
    answer = await http.get(path)
    return answer.status_code, time.monotonic() - started


def _pid(farm: Farm, name: str) -> int:
    pid = farm.supervisor.workers[name].process.pid
    assert pid is not None
    return pid


async def test_a_stopped_worker_leaves_the_ready_set_at_once_and_is_back_when_continued(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("a"), emulated("b")], **QUICK)
    async with supervised_gateway(settings) as farm, _client(farm.url) as client:
        for path in FARM_ROUTES:  # known answers of both workers
            assert (await farm.http.get(path)).status_code == 200
        with stopped(_pid(farm, "b")):
            await farm.until_worker("b", timeout_s=2.0, state="unresponsive")
            for path in [*FARM_ROUTES, "/object_info"]:
                status, seconds = await _timed_get(farm.http, path)
                assert (status, seconds < 1.0) == (200, True), (path, status, seconds)
            stats = (await farm.http.get("/system_stats")).json()
            assert {device["worker"] for device in stats["devices"]} == {"a"}
            ids = [
                await client.queue_prompt(txt2img(CHECKPOINTS[0], "h", seed=j)) for j in range(4)
            ]
            for prompt_id in ids:
                entry = await client.wait(prompt_id, timeout_s=20)
                assert entry["status"]["status_str"] == "success"
                assert (await farm.job(prompt_id))["worker"] == "a", "work sent to a hung worker"
        await farm.until_worker("b", timeout_s=2.0, state="ready", restarts=0)
        stats = (await farm.http.get("/system_stats")).json()
        assert {device["worker"] for device in stats["devices"]} == {"a", "b"}


async def test_a_slow_worker_is_served_from_its_last_answer_within_the_timeout(
    redis_url: str, tmp_path: Path
) -> None:
    # Probed once a minute: the stop is not noticed by liveness, the routes must not wait.
    slow = {**QUICK, "liveness_interval_s": 60.0}
    settings = farm_settings(redis_url, tmp_path, [emulated("a"), emulated("b")], **slow)
    async with supervised_gateway(settings) as farm:
        before = (await farm.http.get("/system_stats")).json()
        with stopped(_pid(farm, "b")):
            status, seconds = await _timed_get(farm.http, "/system_stats")
            assert (status, seconds < 1.0) == (200, True), seconds
            during = (await farm.http.get("/system_stats")).json()
        assert {d["worker"] for d in during["devices"]} == {d["worker"] for d in before["devices"]}


@pytest.mark.slow  # a timing bound, unreliable on a loaded machine
async def test_a_worker_hung_on_a_job_is_restarted_within_seconds_and_the_job_completes(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(
        redis_url, tmp_path, [emulated("a"), emulated("b")], hang_after_s=1.0, **QUICK
    )
    async with supervised_gateway(settings) as farm, _client(farm.url) as client:
        prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "hung", **LONG))
        victim = (await farm.until_job(prompt_id, "running"))["worker"]
        started = time.monotonic()
        with stopped(_pid(farm, victim)):
            await farm.until_worker(victim, timeout_s=6.0, state="ready", restarts=1)
        restarted_s = time.monotonic() - started
        entry = await client.wait(prompt_id, timeout_s=20)
        assert entry["status"]["status_str"] == "success"
        assert restarted_s < 6.0
        assert (await farm.job(prompt_id))["attempts"][0]["worker"] == victim


DRAIN_S, STOP_S = 1.0, 1.0
MARGIN_S = 2.5


@pytest.mark.slow  # a timing bound, unreliable on a loaded machine
async def test_sigterm_with_a_hung_worker_exits_within_drain_and_stop_grace(
    redis_url: str, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "farm.toml", ["w0", "w1"], drain_grace_s=DRAIN_S, stop_grace_s=STOP_S,
        hang_after_s=60.0, time_scale=0.2, **QUICK,
    )  # fmt: skip
    with gateway_process(config, redis_url, tmp_path / "node") as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10, headers=AUTH) as http:
            farm = Farm(gateway.url, None, http)  # type: ignore[arg-type]
            async with _client(gateway.url) as client:
                for seed in range(4):  # each worker: one running, one sent ahead
                    await client.queue_prompt(txt2img(CHECKPOINTS[0], "t", seed=seed, **SLOW))
                victim = await _holding(farm, 2)
                pids = [w["pid"] for w in (await http.get("/gateway/workers")).json()["workers"]]
                os.kill((await farm.worker(victim))["pid"], signal.SIGSTOP)
                await farm.until_worker(victim, timeout_s=2.0, state="unresponsive")
        started = time.monotonic()
        gateway.process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(gateway.process.wait, 60)
        took_s = time.monotonic() - started
    assert code == 0, gateway.log()
    assert took_s < DRAIN_S + STOP_S + MARGIN_S, f"exit took {took_s:.1f}s"
    assert wait_gone(pids) == [], "a worker outlived the gateway"


async def _holding(farm: Farm, count: int, timeout_s: float = 10.0) -> str:
    """The first worker seen holding `count` jobs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        workers = (await farm.http.get("/gateway/workers")).json()["workers"]
        for worker in workers:
            if len(worker["held"]) >= count and worker["running"]:
                return str(worker["name"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker held {count} jobs: {workers}")
