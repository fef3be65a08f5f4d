"""`/metrics` on a real farm: what it counts matches the jobs that ran, with bounded labels."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.farms import TOKEN
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    gateway_settings,
    running_gateway,
    start_emulators,
    stop_emulators,
    txt2img,
)
from tests.integration.prometheus import samples_of, value
from workers.supervision.launch import FarmLayout, WorkerHandle

BOUNDED_LABELS = frozenset(
    {"worker", "group", "family", "outcome", "state", "reason", "how", "phase", "gpu", "name"}
    | {"card", "le"}
)


@pytest.fixture
def two_groups(farm_layout: FarmLayout) -> Iterator[list[WorkerHandle]]:
    """Worker m0 in group a, m1 in group b."""
    handles = start_emulators(farm_layout, ["m0"], group="a")
    try:
        handles += start_emulators(farm_layout, ["m1"], group="b")
        yield handles
    finally:
        stop_emulators(handles)


async def test_metrics_count_the_jobs_that_ran_by_outcome_worker_and_group(
    redis_url: str, tmp_path: Path, two_groups: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    settings = gateway_settings(redis_url, tmp_path, policy="affinity")
    prompt = txt2img(CHECKPOINTS[0], "metrics", seed=3)
    in_a = {"extra_data": {"gateway": {"group": "a"}}}
    in_b = {"extra_data": {"gateway": {"group": "b"}}}
    async with running_gateway(settings, two_groups, farm_layout.input_dir) as url:
        client = ComfyStyleClient(url)
        await client.open()
        first = await client.queue_prompt(prompt, **in_a)
        assert (await client.wait(first))["status"]["status_str"] == "success"
        again = await client.queue_prompt(prompt, **in_a)  # the same graph: served from cache
        assert (await client.wait(again))["status"]["status_str"] == "success"
        async with httpx.AsyncClient() as http:
            armed = await http.post(f"{two_groups[1].url}/emulator/faults", json={"fail_node": "8"})
            assert armed.status_code == 200, armed.text
        failing = await client.queue_prompt(txt2img(CHECKPOINTS[0], "fails", seed=4), **in_b)
        assert (await client.wait(failing))["status"]["status_str"] == "error"
        scraped = await client.http.get("/metrics")
        await client.close()
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    samples = samples_of(scraped.text)
    sd15_a = {"worker": "m0", "group": "a", "family": "sd15"}

    assert value(samples, "comfy_gateway_jobs_accepted_total", family="sd15") == 3
    assert value(samples, "comfy_gateway_jobs_finished_total", outcome="success", **sd15_a) == 2
    assert (
        value(samples, "comfy_gateway_jobs_finished_total", outcome="error", worker="m1", group="b")
        == 1
    )
    assert value(samples, "comfy_gateway_jobs_finished_total") == 3
    for histogram in ("job_seconds", "queue_wait_seconds", "execution_seconds"):
        assert value(samples, f"comfy_gateway_{histogram}_count") == 3, histogram
        assert value(samples, f"comfy_gateway_{histogram}_count", **sd15_a) == 2, histogram
        assert value(samples, f"comfy_gateway_{histogram}_bucket", le="+Inf") == 3, histogram
    assert value(samples, "comfy_gateway_job_seconds_sum") > 0

    assert value(samples, "comfy_gateway_checkpoint_loads_total", worker="m0") == 1
    assert value(samples, "comfy_gateway_checkpoint_cache_hits_total", worker="m0") == 1
    assert value(samples, "comfy_gateway_cached_nodes_total", worker="m0") >= 1
    assert value(samples, "comfy_gateway_relay_lag_seconds_count", worker="m0") >= 2
    assert value(samples, "comfy_gateway_job_retries_total") == 0

    assert value(samples, "comfy_gateway_jobs", state="pending") == 0
    assert value(samples, "comfy_gateway_jobs", state="running") == 0
    assert value(samples, "comfy_gateway_worker_state", worker="m1", state="ready") == 1
    assert value(samples, "comfy_gateway_worker_info", worker="m1", group="b") == 1
    assert value(samples, "comfy_gateway_websocket_clients") == 1
    assert value(samples, "comfy_gateway_redis_up") == 1
    assert value(samples, "comfy_gateway_gpu_telemetry_available") == 0
    assert not [s for s in samples if s.name.startswith("comfy_gateway_gpu_memory")]

    ids = {first, again, failing, client.client_id}
    for sample in samples:
        assert set(sample.labels) <= BOUNDED_LABELS, sample
        assert not ids & set(sample.labels.values()), sample


async def test_waiting_jobs_show_by_model_in_the_dashboard_data_and_the_metrics(
    redis_url: str, tmp_path: Path, two_groups: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    settings = gateway_settings(redis_url, tmp_path, auth_token=TOKEN)
    async with running_gateway(settings, two_groups, farm_layout.input_dir) as url:
        client = ComfyStyleClient(url, token=TOKEN)
        for worker in ("m0", "m1"):
            drained = await client.http.post(f"/gateway/workers/{worker}/drain")
            assert drained.status_code == 200, drained.text
        sd15, sdxl = CHECKPOINTS[0], CHECKPOINTS[2]
        prompts = [txt2img(sd15, "q", seed=1), txt2img(sd15, "q", seed=2), txt2img(sdxl, "q")]
        ids = [await client.queue_prompt(p) for p in prompts]

        dashboard = (await client.http.get("/gateway/dashboard.json")).json()
        assert dashboard["queue"] == [{"model": sd15, "jobs": 2}, {"model": sdxl, "jobs": 1}]
        assert [w["name"] for w in dashboard["workers"]] == ["m0", "m1"]
        samples = samples_of((await client.http.get("/metrics")).text)
        assert value(samples, "comfy_gateway_jobs", state="pending") == 3
        assert value(samples, "comfy_gateway_queue_jobs", family="sd15") == 2
        assert value(samples, "comfy_gateway_queue_jobs", family="sdxl") == 1
        assert value(samples, "comfy_gateway_worker_state", state="draining") == 2

        deleted = await client.http.post("/queue", json={"delete": [ids[2]]})
        assert deleted.status_code == 200, deleted.text
        samples = samples_of((await client.http.get("/metrics")).text)
        assert value(samples, "comfy_gateway_jobs_finished_total", outcome="cancelled") == 1
        assert value(samples, "comfy_gateway_queue_jobs", family="sdxl") == 0
        live = await first_event(client, "/gateway/events")
        assert live["queue"] == [{"model": sd15, "jobs": 2}]
        await client.http.aclose()


async def first_event(client: ComfyStyleClient, path: str) -> dict[str, Any]:
    """The first `data:` of a server-sent event stream, as JSON."""
    async with client.http.stream("GET", path) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                event: dict[str, Any] = json.loads(line.removeprefix("data: "))
                return event
    raise AssertionError(f"{path} ended without an event")
