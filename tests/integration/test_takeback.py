"""Head-of-line blocking, end to end: a job prefetched behind a long one moves to a worker
that goes idle, with real emulator workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    start_emulators,
    stop_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout, WorkerHandle


@pytest.fixture
def pair(farm_layout: FarmLayout) -> Iterator[list[WorkerHandle]]:
    """Two emulated workers of their own (their history is read below)."""
    handles = start_emulators(farm_layout, ["hol0", "hol1"])
    yield handles
    stop_emulators(handles)


async def test_a_job_prefetched_behind_a_long_one_moves_to_a_worker_that_goes_idle(
    redis_url: str, tmp_path: Path, pair: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    # swarm_like places deterministically: a free worker holding the model takes the job.
    # The long job runs on A; B takes two medium jobs of another checkpoint, so the short job
    # of A's checkpoint is prefetched on A, behind the long one. Once B is done it is idle.
    settings = gateway_settings(redis_url, tmp_path, policy="swarm_like", prefetch=1)
    by_name = {handle.name: handle for handle in pair}
    async with running_gateway(settings, as_external(pair), farm_layout.input_dir) as url:
        client = ComfyStyleClient(url)
        await client.open()
        long_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "long", steps=10000, size=1024))
        a = (await client.job_in(long_id, ("running",), timeout_s=15))["worker"]
        medium = [txt2img(CHECKPOINTS[1], "mid", seed=j, steps=1500, size=512) for j in range(2)]
        medium_ids = [await client.queue_prompt(p) for p in medium]
        held = [await client.job_in(j, ("assigned", "running"), timeout_s=15) for j in medium_ids]
        b = held[0]["worker"]
        assert b != a and held[1]["worker"] == b, "B should hold both medium jobs"
        short_id = await client.queue_prompt(txt2img(CHECKPOINTS[0], "short"))
        sent = await client.job_in(short_id, ("assigned", "running", "success"), timeout_s=15)
        assert sent["worker"] == a, "the short job should be prefetched behind the long one"
        try:
            entry = await client.wait(short_id, timeout_s=15)
            job = await client.job(short_id)
            long_job = await client.job(long_id)
            assert long_job["state"] == "running", "the short job waited for the long one"
            assert entry["gateway"]["worker"] == b
            assert [x["worker"] for x in job["attempts"]] == [a, b]
            assert job["attempts"][0]["outcome"] == f"taken back for {b}"
            assert job["failures"] == 0
            async with httpx.AsyncClient() as http:
                on_a = (await http.get(f"{by_name[a].url}/history/{short_id}")).json()
            assert on_a == {}, "the holder ran it too"
        finally:
            await client.http.post("/interrupt", json={"prompt_id": long_id})
            await client.wait(long_id, timeout_s=15)
            await client.close()
