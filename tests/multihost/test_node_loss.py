"""A node killed mid-run: what it held goes back to the queue once its registration lapses,
is taken by the other node and finishes exactly once; its workers leave the farm's catalogue
until it returns and rejoins."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.peers.takeover import OUTCOME
from tests.faults.farms import AUTH, GatewayProcess, wait_gone
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.multihost.conftest import client_of, node_process, nodes, until_checkpoints, wait_nodes
from workers.supervision.process import alive

ONLY_B = CHECKPOINTS[2]
FARM = {
    "wa": {"checkpoints": CHECKPOINTS[:2], "preload": [CHECKPOINTS[0]]},
    "wb": {"checkpoints": CHECKPOINTS, "preload": [CHECKPOINTS[1]]},
}


async def running_on(client: ComfyStyleClient, worker: str, ids: list[str]) -> str:
    """The first of `ids` seen running on `worker`."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for prompt_id in ids:
            job = await client.job(prompt_id)
            if job.get("state") == "running" and job.get("worker") == worker:
                return prompt_id
        await asyncio.sleep(0.02)
    raise AssertionError(f"no job ran on {worker}")


def kill_node(node: GatewayProcess, worker: dict[str, Any]) -> None:
    """SIGKILL the gateway process and its worker: the host is gone."""
    node.process.send_signal(signal.SIGKILL)
    node.process.wait()
    if worker.get("pid") and alive(worker["pid"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker["pid"], signal.SIGKILL)
    assert wait_gone([worker["pid"]]) == []


def outcomes(job: dict[str, Any]) -> list[str]:
    return [attempt.get("outcome", "") for attempt in job["attempts"]]


def exactly_once(client: ComfyStyleClient, history: dict[str, Any], ids: list[str]) -> None:
    """Every accepted job has one terminal record, a success, and its client heard one end."""
    assert sorted(history) == sorted(ids)
    for prompt_id in ids:
        assert history[prompt_id]["status"]["status_str"] == "success", history[prompt_id]
        events = client.events_of(prompt_id)
        assert events.count("execution_success") == 1, (prompt_id, events)
        ends = [
            e
            for e in client.events
            if e["type"] == "executing"
            and e["data"].get("prompt_id") == prompt_id
            and e["data"].get("node") is None
        ]
        assert len(ends) == 1, (prompt_id, ends)


async def test_a_killed_node_s_jobs_finish_once_on_the_other_and_it_rejoins(
    redis_url: str, tmp_path: Path
) -> None:
    with nodes(redis_url, tmp_path, FARM) as (a, b):
        async with client_of(a.url) as client:
            ids = [
                await client.queue_prompt(txt2img(CHECKPOINTS[s % 2], f"k{s}", seed=s, steps=2000))
                for s in range(4)
            ]
            victim = await running_on(client, "wb", ids)
            async with httpx.AsyncClient(headers=AUTH, timeout=5) as http:
                worker = (await http.get(b.url + "/gateway/workers/wb")).json()
            kill_node(b, worker)
            for prompt_id in ids:
                await client.wait(prompt_id, timeout_s=40)
            history = (await client.http.get("/history")).json()
            exactly_once(client, history, ids)
            taken = [p for p in ids if OUTCOME in outcomes(await client.job(p))]
            assert victim in taken  # it was running on B when B was killed
            for prompt_id in taken:
                attempts = (await client.job(prompt_id))["attempts"]
                assert [x["worker"] for x in attempts] == ["wb", "wa"]
                on_a = (await client.http.get(f"/history/{prompt_id}")).json()[prompt_id]
                assert on_a["gateway"]["worker"] == "wa"

            # Gone from the farm's catalogue once lapsed; back when the node rejoins.
            await until_checkpoints(a.url, False, ONLY_B)
            refused = await client.post(txt2img(ONLY_B, "nowhere"))
            assert refused.status_code == 400
            with node_process(redis_url, tmp_path, "wb", **FARM["wb"]) as again:
                wait_nodes(again.url, 1)
                await until_checkpoints(a.url, True, ONLY_B)
                back = await client.queue_prompt(txt2img(ONLY_B, "back"))
                entry = await client.wait(back, timeout_s=20)
    assert entry["gateway"]["worker"] == "wb"


@pytest.mark.slow  # long; tests/unit/peers covers the take-over
async def test_a_node_frozen_past_its_ttl_lets_go_of_the_job_taken_over_meanwhile(
    redis_url: str, tmp_path: Path
) -> None:
    farm = {"wa": {"preload": [CHECKPOINTS[0]]}, "wb": {"preload": [CHECKPOINTS[1]]}}
    with nodes(redis_url, tmp_path, farm) as (a, b):
        async with client_of(b.url) as client:
            prompt_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "frozen", steps=3000))
            assert (await client.job_in(prompt_id, ("running",)))["worker"] == "wa"
            a.process.send_signal(signal.SIGSTOP)
            try:
                entry = await client.wait(prompt_id, timeout_s=40)
            finally:
                a.process.send_signal(signal.SIGCONT)
            wait_nodes(a.url, 1)
            held = await until_held_nothing(a.url, "wa")
            attempts = (await client.job(prompt_id))["attempts"]
    assert entry["status"]["status_str"] == "success"
    assert [(x["worker"], x["outcome"]) for x in attempts] == [("wa", OUTCOME), ("wb", "success")]
    assert client.events_of(prompt_id).count("execution_success") == 1
    assert held == []


async def until_held_nothing(url: str, worker: str, timeout_s: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(headers=AUTH, timeout=5) as http:
        while True:
            held: list[str] = (await http.get(f"{url}/gateway/workers/{worker}")).json()["held"]
            if not held or time.monotonic() > deadline:
                return held
            await asyncio.sleep(0.05)
