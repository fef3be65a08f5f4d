"""A cold worker warms up while idle (`gateway.scheduler.warming`), on the farm `serve` builds:
its first use is paid by the warm-up, not by a client's job."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from gateway.settings import WorkerConfig
from tests.faults.farms import Farm, emulated, farm_client, farm_settings, supervised_gateway
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.waiting import rounds_pass
from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import CostModel, LoadTier
from workers.emulator.card.profiles import load_profile


async def _emulator(farm: Farm, name: str) -> dict[str, Any]:
    url = (await farm.worker(name))["url"]
    async with httpx.AsyncClient() as http:
        state: dict[str, Any] = (await http.get(f"{url}/emulator/state")).json()
    return state


async def _run_one(
    farm: Farm, client: ComfyStyleClient, checkpoint: str, steps: int = 1
) -> tuple[str, str]:
    """Runs a job to success; its id and the worker that ran it."""
    prompt_id = await client.queue_prompt(txt2img(checkpoint, "warming", steps=steps))
    entry = await client.wait(prompt_id, timeout_s=20)
    assert entry["status"]["status_str"] == "success"
    worker: str = (await farm.job(prompt_id))["worker"]
    return prompt_id, worker


async def test_a_cold_idle_worker_pays_its_first_use_on_a_warm_up_of_what_clients_ask_for(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("a"), emulated("b")])
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        for name in ("a", "b"):
            assert (await farm.worker(name))["cold"] is True
        prompt_id, ran = await _run_one(farm, client, CHECKPOINTS[1])
        other = "b" if ran == "a" else "a"
        record = await farm.until_worker(other, cold=False, warming=None, state="ready")
        assert record["resident"] == [CHECKPOINTS[1]]
        assert record["load_s"][CHECKPOINTS[1]] > 0, "the warm-up's cold read seeds its load"
        state = await _emulator(farm, other)
        assert state["first_job_pending"] is False
        assert state["counters"]["prompts_started"] == 1, "one warm-up prompt, no speed probe"
        assert state["models"]["resident"] == [CHECKPOINTS[1]]
        # No client heard of the warm-up: it ran under a client id of its own.
        assert client.prompt_ids_seen() == {prompt_id}


async def test_with_warming_off_a_cold_worker_stays_cold_until_a_job_reaches_it(
    redis_url: str, tmp_path: Path
) -> None:
    workers = [emulated("a"), emulated("b")]
    settings = farm_settings(redis_url, tmp_path, workers, warm_cold_workers=False)
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        _, ran = await _run_one(farm, client, CHECKPOINTS[1])
        other = "b" if ran == "a" else "a"
        await rounds_pass(lambda: farm.dispatcher.rounds if farm.dispatcher else 0, count=5)
        assert (await farm.worker(other))["cold"] is True
        state = await _emulator(farm, other)
        assert state["first_job_pending"] is True
        assert state["counters"]["prompts_started"] == 0


async def test_a_cold_worker_never_warms_on_a_checkpoint_it_does_not_have(
    redis_url: str, tmp_path: Path
) -> None:
    others = [c for c in CHECKPOINTS if c != CHECKPOINTS[1]]
    lacking = WorkerConfig(name="b", emulate="rtx4070ti", checkpoints=others)
    settings = farm_settings(redis_url, tmp_path, [emulated("a"), lacking])
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        assert (await _run_one(farm, client, CHECKPOINTS[1]))[1] == "a"
        await rounds_pass(lambda: farm.dispatcher.rounds if farm.dispatcher else 0, count=5)
        assert (await farm.worker("b"))["cold"] is True
        assert (await _emulator(farm, "b"))["counters"]["prompts_started"] == 0
        # Once a job b may run has been seen, it warms up on that one.
        await _run_one(farm, client, CHECKPOINTS[0])
        record = await farm.until_worker("b", cold=False, warming=None)
        assert CHECKPOINTS[1] not in record["resident"]


async def test_the_first_jobs_load_teaches_its_read_not_the_cards_first_use(
    redis_url: str, tmp_path: Path
) -> None:
    """The first job of a fresh farm pays its card's first use before its sampler's first step
    (3.5 s on an emulated RTX 4070 Ti, against a 1.4 s read of an SD1.5 checkpoint from
    disk). Its worker learns the read, the load it will pay again; counting the first use
    would make it the last choice for every later load."""
    workers = [emulated("a"), emulated("b")]
    scale = 0.1
    settings = farm_settings(redis_url, tmp_path, workers, time_scale=scale, policy="affinity")
    async with supervised_gateway(settings) as farm, farm_client(farm) as client:
        # Steps enough to time the sampler's set-up, where the first use shows.
        _, ran = await _run_one(farm, client, CHECKPOINTS[1], steps=10)
        learned = (await farm.worker(ran))["load_s"][CHECKPOINTS[1]]
    card = CostModel(load_profile("rtx4070ti"), LaunchFlags())
    assert learned < 1.2 * card.read_s("sd15", LoadTier.DISK) * scale


async def test_the_emulators_of_one_node_share_their_hosts_page_cache(
    redis_url: str, tmp_path: Path
) -> None:
    """A real host reads a checkpoint from disk once for all its ComfyUI processes: the
    emulators `serve` starts share one page cache, so b's load of what a read is a
    page-cache read."""
    workers = [emulated("a"), emulated("b")]
    settings = farm_settings(redis_url, tmp_path, workers, warm_cold_workers=False)
    async with supervised_gateway(settings) as farm, httpx.AsyncClient() as http:
        for name in ("a", "b"):
            url = (await farm.worker(name))["url"]
            sent = await http.post(f"{url}/prompt", json={"prompt": txt2img(CHECKPOINTS[1], name)})
            prompt_id = sent.json()["prompt_id"]
            for _ in range(200):
                if prompt_id in (await http.get(f"{url}/history/{prompt_id}")).json():
                    break
                await asyncio.sleep(0.02)
        assert (await _emulator(farm, "a"))["counters"]["loads"] == {"disk": 1}
        assert (await _emulator(farm, "b"))["counters"]["loads"] == {"page_cache": 1}
