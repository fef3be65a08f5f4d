"""A gateway killed with SIGKILL costs no work: its workers go on under their keepers, the next
gateway on the same data dir adopts them and the jobs they run, and a job is never run twice
nor reported twice. Workers that no gateway adopts stop after `orphan_grace_s`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.faults.farms import (
    AUTH,
    TOKEN,
    GatewayProcess,
    gateway_process,
    wait_gone,
    write_config,
)
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, txt2img
from workers.supervision.process import alive

pytestmark = pytest.mark.timeout(90)

LONG = {"steps": 10000, "size": 1024}
"""About ten seconds of sampling at time scale 0.01 (sd15 on the rtx4070ti profile): still
running when the next gateway is up."""
SHORT = {"steps": 4000, "size": 512}
"""About two seconds: over before the next gateway is started."""


async def _workers(gateway: GatewayProcess) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=gateway.url, headers=AUTH, timeout=10) as http:
        workers: list[dict[str, Any]] = (await http.get("/gateway/workers")).json()["workers"]
    return workers


@asynccontextmanager
async def _client(url: str, client_id: str | None = None) -> AsyncIterator[ComfyStyleClient]:
    client = ComfyStyleClient(url, token=TOKEN)
    if client_id is not None:
        client.client_id = client_id
    await client.open()
    try:
        yield client
    finally:
        with contextlib.suppress(websockets.ConnectionClosed):  # its gateway was killed
            await client.close()
        await client.http.aclose()


async def _until(predicate: Any, timeout_s: float = 20.0) -> None:
    """Poll `predicate` (state in other processes: nothing here to wait on) until it holds."""
    async with asyncio.timeout(timeout_s):
        while not await predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _kill(gateway: GatewayProcess) -> None:
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait()


def _count(events: list[dict[str, Any]], kind: str, prompt_id: str) -> int:
    return sum(
        1
        for e in events
        if e["type"] == kind and (e.get("data") or {}).get("prompt_id") == prompt_id
    )


async def test_the_next_gateway_adopts_the_workers_and_the_job_they_run(
    redis_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "farm.toml", ["w0"])
    data = tmp_path / "node"
    with gateway_process(config, redis_url, data) as first:
        async with _client(first.url) as client:
            prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "a", seed=1, **LONG))
            await _until(lambda: _has(client, "progress", prompt_id))
            pid = (await _workers(first))[0]["pid"]
            _kill(first)
            client_id, before = client.client_id, list(client.events)
    assert alive(pid), "the worker died with its gateway"
    with gateway_process(config, redis_url, data) as second:
        (worker,) = await _workers(second)
        assert worker["pid"] == pid, "the worker was started anew instead of adopted"
        async with _client(second.url, client_id) as client:
            entry = await _ended(client, prompt_id, second)
            events = before + client.events
        assert entry["status"]["status_str"] == "success"
        job = await client_job(second, prompt_id)
        assert len(job["attempts"]) == 1, job["attempts"]
        assert _count(events, "execution_success", prompt_id) == 1
        ends = [e for e in events if e["type"] == "executing" and e["data"]["node"] is None]
        assert [e["data"]["prompt_id"] for e in ends] == [prompt_id]


async def test_a_job_that_ends_while_no_gateway_runs_is_recorded_once_and_not_run_again(
    redis_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "farm.toml", ["w0"])
    data = tmp_path / "node"
    with gateway_process(config, redis_url, data) as first:
        async with _client(first.url) as client:
            prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "b", seed=2, **SHORT))
            await _until(lambda: _has(client, "progress", prompt_id))
            (worker,) = await _workers(first)
            _kill(first)
    async with httpx.AsyncClient(base_url=worker["url"], timeout=5) as direct:

        async def finished() -> bool:
            return prompt_id in (await direct.get(f"/history/{prompt_id}")).json()

        await _until(finished)  # it ended on its worker, with no gateway to hear it
        with gateway_process(config, redis_url, data) as second:
            # Recorded at adoption, before any client could listen: clients find it in history.
            job = await _job_in(second, prompt_id, "success")
            assert len(job["attempts"]) == 1, job["attempts"]
            async with httpx.AsyncClient(base_url=second.url, headers=AUTH) as http:
                history = (await http.get(f"/history/{prompt_id}")).json()
            assert history[prompt_id]["status"]["status_str"] == "success"
            runs = (await direct.get("/history")).json()
            assert list(runs) == [prompt_id], "the job was sent to its worker again"


async def test_workers_no_gateway_adopts_stop_after_the_orphan_grace(
    redis_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "farm.toml", ["k0", "k1"], orphan_grace_s=3.0)
    with gateway_process(config, redis_url, tmp_path / "node") as gateway:
        pids = [w["pid"] for w in await _workers(gateway)]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        _kill(gateway)
    assert wait_gone(pids, timeout_s=15.0) == [], "orphan workers outlived their grace"


async def _ended(
    client: ComfyStyleClient, prompt_id: str, gateway: GatewayProcess
) -> dict[str, Any]:
    try:
        return await client.wait(prompt_id, timeout_s=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ngateway log:\n{gateway.log()}") from None


async def _has(client: ComfyStyleClient, kind: str, prompt_id: str) -> bool:
    return kind in client.events_of(prompt_id)


async def _job_in(gateway: GatewayProcess, prompt_id: str, state: str) -> dict[str, Any]:
    async def reached() -> bool:
        return (await client_job(gateway, prompt_id)).get("state") == state

    await _until(reached)
    return await client_job(gateway, prompt_id)


async def client_job(gateway: GatewayProcess, prompt_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=gateway.url, headers=AUTH, timeout=10) as http:
        job: dict[str, Any] = (await http.get(f"/gateway/jobs/{prompt_id}")).json()
    return job
