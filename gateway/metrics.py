"""Prometheus metrics, computed at scrape time: workers, jobs, queue, GPU telemetry.

A fresh registry per scrape holds one collector of already-computed families, so nothing is
registered globally (several apps in one process, as in tests, never collide).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.farm import Farm
from gateway.jobs import JobStore
from gateway.models import HELD, JobState
from gateway.status import display_state
from workers.telemetry import MIB, TelemetrySnapshot

PREFIX = "comfy_gateway"


class _Computed(Collector):
    def __init__(self, families: Iterable[Metric]):
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def render(farm: Farm, store: JobStore) -> bytes:
    """The text exposition of every metric of this node."""
    families = [*worker_families(farm), *await job_families(store)]
    telemetry = farm.telemetry.snapshot() if farm.telemetry is not None else None
    families += gpu_families(telemetry)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Computed(families))
    return generate_latest(registry)


def worker_families(farm: Farm) -> list[Metric]:
    state = GaugeMetricFamily(
        f"{PREFIX}_worker_state", "1 for the state each worker is in", labels=["worker", "state"]
    )
    held = GaugeMetricFamily(
        f"{PREFIX}_worker_jobs", "Jobs sent to each worker and not finished", labels=["worker"]
    )
    restarts = CounterMetricFamily(
        f"{PREFIX}_worker_restarts", "Restarts of each worker's process", labels=["worker"]
    )
    for link in farm.links:
        status = farm.supervisor.status(link.name) if farm.supervisor is not None else None
        state.add_metric([link.name, display_state(link, status)], 1)
        held.add_metric([link.name], len(link.held))
        restarts.add_metric([link.name], status.restarts if status is not None else 0)
    return [state, held, restarts]


async def job_families(store: JobStore) -> list[Metric]:
    pending = len(await store.pending_ids())
    held = Counter(job.state for job in await store.get_many(await store.held_ids()))
    jobs = GaugeMetricFamily(
        f"{PREFIX}_jobs", "Jobs not finished, by state (the whole farm)", labels=["state"]
    )
    jobs.add_metric([JobState.PENDING.value], pending)
    for job_state in sorted(HELD):
        jobs.add_metric([job_state.value], held[job_state])
    queue = GaugeMetricFamily(
        f"{PREFIX}_queue_remaining", "Prompts waiting or running, as clients see it"
    )
    queue.add_metric([], await store.queue_remaining())
    history = GaugeMetricFamily(f"{PREFIX}_history_entries", "Finished jobs kept in history")
    history.add_metric([], await store.history_count())
    return [jobs, queue, history]


_GPU_GAUGES = (
    ("memory_used_bytes", "GPU memory in use", lambda s: s.memory_used_mib * MIB),
    ("memory_total_bytes", "GPU memory in total", lambda s: s.memory_total_mib * MIB),
    ("utilization_ratio", "GPU busy fraction", lambda s: _scaled(s.utilization_pct, 0.01)),
    ("temperature_celsius", "GPU temperature", lambda s: s.temperature_c),
    ("power_watts", "GPU power draw", lambda s: s.power_w),
    ("sm_clock_hertz", "GPU SM clock", lambda s: _scaled(s.sm_clock_mhz, 1e6)),
)


def gpu_families(snapshot: TelemetrySnapshot | None) -> list[Metric]:
    available = GaugeMetricFamily(
        f"{PREFIX}_gpu_telemetry_available", "1 when NVML can be read on this node"
    )
    available.add_metric([], 1 if snapshot is not None and snapshot.available else 0)
    families: list[Metric] = [available]
    if snapshot is None:
        return families
    for suffix, help_text, read in _GPU_GAUGES:
        family = GaugeMetricFamily(f"{PREFIX}_gpu_{suffix}", help_text, labels=["gpu", "name"])
        for sample in snapshot.gpus.values():
            value = read(sample)
            if value is not None:
                family.add_metric([str(sample.index), sample.name], float(value))
        families.append(family)
    return families


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor
