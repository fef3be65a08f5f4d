"""GPU telemetry as `/gateway/workers` and `/metrics` show it: readings, or why there are none."""

from __future__ import annotations

from types import MappingProxyType

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry, generate_latest

from gateway.dispatch.links import Links
from gateway.farm.describe import telemetry_fields, vram_of
from gateway.jobs.keys import Keys
from gateway.jobs.store import JobStore
from gateway.metrics.scraped import _Computed, gpu_families, job_families
from workers.supervision.ports import free_port
from workers.telemetry import GpuSample, TelemetrySnapshot


def sample(index: int, total_mib: float, used_mib: float = 1000.0) -> GpuSample:
    return GpuSample(index, "NVIDIA H200", used_mib, total_mib, 87, 61, 412.5, 1980, 1.0)


SNAPSHOT = TelemetrySnapshot(
    True,
    gpus=MappingProxyType({0: sample(0, 143771), 1: sample(1, 81559, used_mib=559)}),
    errors=MappingProxyType({2: "NVML: GPU is lost"}),
)


def exposition(snapshot: TelemetrySnapshot | None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Computed(gpu_families(snapshot)))
    return generate_latest(registry).decode()


def test_each_gpu_reading_becomes_a_gauge_in_base_units() -> None:
    text = exposition(SNAPSHOT)
    assert "comfy_gateway_gpu_telemetry_available 1.0" in text
    assert (
        'comfy_gateway_gpu_memory_total_bytes{gpu="0",name="NVIDIA H200"} 1.50754820096e+11' in text
    )
    assert 'comfy_gateway_gpu_utilization_ratio{gpu="1",name="NVIDIA H200"} 0.87' in text
    assert 'comfy_gateway_gpu_sm_clock_hertz{gpu="0",name="NVIDIA H200"} 1.98e+09' in text


def test_without_nvml_the_metrics_say_so_and_nothing_else() -> None:
    text = exposition(TelemetrySnapshot(False, reason="NVML: no NVIDIA GPU found"))
    assert "comfy_gateway_gpu_telemetry_available 0.0" in text
    assert "comfy_gateway_gpu_memory_used_bytes{" not in text


def test_a_worker_shows_the_gpus_of_its_slot_and_their_errors() -> None:
    fields = telemetry_fields(SNAPSHOT, (1, 2))
    assert [gpu["index"] for gpu in fields["gpus"]] == [1]
    assert fields["gpus"][0]["memory_used_mib"] == 559
    assert fields["errors"] == {"2": "NVML: GPU is lost"}
    off = telemetry_fields(TelemetrySnapshot(False, reason="NVML: driver not loaded"), (0,))
    assert off == {"available": False, "reason": "NVML: driver not loaded"}


def test_a_slots_vram_is_its_smallest_cards() -> None:
    assert vram_of(SNAPSHOT, (0, 1)) == (81000.0, 81559)
    assert vram_of(SNAPSHOT, (2,)) is None
    assert vram_of(None, (0,)) is None


async def test_a_scrape_while_redis_is_down_says_so_and_leaves_the_queue_out() -> None:
    redis = aioredis.Redis(port=free_port(), socket_connect_timeout=1)
    try:
        families = await job_families(Links([]), JobStore(redis, Keys()))
    finally:
        await redis.aclose()
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [
        ("comfy_gateway_redis_up", [0.0])
    ]
