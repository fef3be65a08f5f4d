"""A job in Redis that cannot be sent to any worker (here a NaN, which an older gateway or
another node may have stored: JSON cannot carry it) ends with an error in its history and
frees its worker's slot, instead of staying `assigned` with its lease renewed forever."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.jobs.keys import Keys
from gateway.jobs.models import NewJob, Placement
from gateway.jobs.store import JobStore
from tests.faults.farms import Farm, emulated, farm_settings, supervised_gateway
from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(60)


async def _enqueue_directly(redis_url: str, prompt: dict[str, Any], names: tuple[str, ...]) -> str:
    client = aioredis.from_url(redis_url, decode_responses=True)
    try:
        store = JobStore(client, Keys("cg"))
        job = NewJob(
            job_id=f"unsendable-{time.monotonic_ns()}",
            prompt=prompt,
            extra_data={},
            client_id=None,
            outputs=("9",),
            placement=Placement(CHECKPOINTS[0], eligible=names),
        )
        await store.enqueue(job)
        return job.job_id
    finally:
        await client.aclose()


async def _held(farm: Farm, name: str) -> list[str]:
    held: list[str] = (await farm.worker(name))["held"]
    return held


async def test_a_job_that_cannot_be_sent_ends_in_error_and_frees_its_slot(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("only")], prefetch=0)
    async with supervised_gateway(settings) as farm:
        bad = txt2img(CHECKPOINTS[0], "nan")
        bad["3"]["inputs"]["cfg"] = math.nan
        job_ids = [await _enqueue_directly(redis_url, bad, ("only",)) for _ in range(3)]
        for job_id in job_ids:
            record = await farm.until_job(job_id, "error", timeout_s=10)
            assert record["failures"] == 0 and len(record["attempts"]) == 1
        entry = (await farm.http.get(f"/history/{job_ids[0]}")).json()[job_ids[0]]
        error = entry["status"]["messages"][-1][1]
        assert error["exception_type"] == "GatewaySendError"
        assert "could not send this prompt" in error["exception_message"]
        assert await _held(farm, "only") == []
        good = await farm.http.post("/prompt", json={"prompt": txt2img(CHECKPOINTS[0], "ok")})
        assert good.status_code == 200, good.text
        await farm.until_job(good.json()["prompt_id"], "success", timeout_s=10)
