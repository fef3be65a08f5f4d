"""Nodes that start at the same moment: one queue, each job claimed once; one worker name is
never served by two live nodes."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.faults.farms import AUTH, GatewayProcess
from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.multihost.conftest import client_of, node_process, nodes, started_together


@pytest.mark.slow  # long; tests/unit/peers covers the claims
async def test_two_nodes_starting_on_a_waiting_queue_run_each_job_once(
    redis_url: str, tmp_path: Path
) -> None:
    # The nodes take prompts with their workers drained, so they wait in Redis; they stop.
    with nodes(redis_url, tmp_path, {"wa": {}, "wb": {}}) as (a, b):
        async with client_of(a.url) as client:
            for node, worker in ((a, "wa"), (b, "wb")):
                drained = await client.http.post(f"{node.url}/gateway/workers/{worker}/drain")
                assert drained.status_code == 200
            ids = [
                await client.queue_prompt(txt2img(CHECKPOINTS[s % 3], f"t{s}", seed=s))
                for s in range(8)
            ]
        stop(a, b)
    # Both start again at the same moment on that queue.
    processes = [node_process(redis_url, tmp_path, name) for name in ("wa", "wb")]
    with started_together(processes) as (a, _):
        assert isinstance(a, GatewayProcess)
        async with client_of(a.url) as client:
            jobs = [await client.job_in(prompt_id, ("success",), timeout_s=30) for prompt_id in ids]
    assert all(len(job["attempts"]) == 1 for job in jobs), [job["attempts"] for job in jobs]
    assert {job["worker"] for job in jobs} <= {"wa", "wb"}


def stop(*processes: GatewayProcess) -> None:
    for node in processes:
        node.process.send_signal(signal.SIGTERM)
    for node in processes:
        assert node.process.wait(30) == 0, node.log()


@pytest.mark.slow  # long; tests/unit/peers covers the claims
async def test_of_two_nodes_starting_with_one_worker_name_one_serves_and_one_exits(
    redis_url: str, tmp_path: Path
) -> None:
    processes = [node_process(redis_url, tmp_path / side, "same") for side in ("a", "b")]
    with started_together(processes) as started:
        served = [node for node in started if isinstance(node, GatewayProcess)]
        refused = [node for node in started if not isinstance(node, GatewayProcess)]
        assert len(served) == 1 and len(refused) == 1, started
        assert "belongs to the live gateway node" in str(refused[0])
        async with httpx.AsyncClient(headers=AUTH, timeout=5) as http:
            ready = await http.get(served[0].url + "/readyz")
    assert ready.status_code == 200
