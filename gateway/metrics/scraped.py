"""`/metrics`: the recorded counters and histograms (`gateway.metrics.recorded`) with gauges
computed at scrape time from state already held: workers, the queue, GPU telemetry, sockets,
Redis.

A scrape costs a few constant-time Redis reads (queue lengths, the queue's group index), never
a scan of the jobs. Gauges are built fresh for each scrape in a registry of their own, so
nothing is registered globally (several apps in one process, as in tests, never collide).
A scrape while Redis is down still answers: `comfy_gateway_redis_up` 0, the queue's gauges
left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from gateway.dispatch.links import Links
from gateway.events.hub import Hub
from gateway.farm.describe import display_state
from gateway.farm.node import Farm
from gateway.jobs.models import JobState
from gateway.jobs.store import JobStore
from gateway.metrics.recorded import PREFIX
from gateway.redis_keeper import RedisHealth
from workers.telemetry import MIB, TelemetrySnapshot


class _Computed(Collector):
    def __init__(self, families: Iterable[Metric]):
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def render(
    farm: Farm, store: JobStore, hub: Hub, redis_health: Callable[[], RedisHealth] | None
) -> bytes:
    """The text exposition of every metric of this node."""
    telemetry = farm.telemetry.snapshot() if farm.telemetry is not None else None
    families = [
        *worker_families(farm),
        *await job_families(farm.links, store),
        *gpu_families(telemetry),
        *socket_families(hub),
        *redis_families(redis_health),
        *farm.metrics.registry.collect(),
    ]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Computed(families))
    return generate_latest(registry)


def _gauge(name: str, help_text: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", help_text, labels=list(labels))


def worker_families(farm: Farm) -> list[Metric]:
    state = _gauge("worker_state", "1 for the state each worker is in", ["worker", "state"])
    info = _gauge("worker_info", "Each worker's group and card", ["worker", "group", "card"])
    held = _gauge("worker_jobs", "Jobs sent to each worker and not finished", ["worker"])
    running = _gauge("worker_running", "1 while the worker runs a job", ["worker"])
    resident = _gauge(
        "worker_resident_models", "Models believed in the worker's memory", ["worker"]
    )
    restarts = CounterMetricFamily(
        f"{PREFIX}_worker_restarts", "Restarts of each worker's process", labels=["worker"]
    )
    for link in farm.links:
        status = farm.supervisor.status(link.name) if farm.supervisor is not None else None
        state.add_metric([link.name, display_state(link, status)], 1)
        info.add_metric([link.name, link.group, link.card or ""], 1)
        held.add_metric([link.name], len(link.held))
        running.add_metric([link.name], 1 if link.running else 0)
        resident.add_metric([link.name], len(link.resident))
        restarts.add_metric([link.name], status.restarts if status is not None else 0)
    return [state, info, held, running, resident, restarts]


async def job_families(links: Links, store: JobStore) -> list[Metric]:
    """Jobs by state: pending is the farm's queue (the same on every node), assigned and
    running are this node's workers' (they add up over the nodes)."""
    up = _gauge("redis_up", "1 when Redis answered this scrape")
    try:
        reads = await _queue_reads(store)
    except (RedisError, OSError):
        up.add_metric([], 0)
        return [up]
    up.add_metric([], 1)
    jobs = _gauge("jobs", "Jobs not finished, by state", ["state"])
    running = sum(1 for link in links if link.running)
    held = sum(len(link.held) for link in links)
    jobs.add_metric([JobState.PENDING.value], reads.pending)
    jobs.add_metric([JobState.ASSIGNED.value], held - running)
    jobs.add_metric([JobState.RUNNING.value], running)
    waiting = _gauge("queue_jobs", "Jobs waiting, by model family", ["family"])
    for family, count in sorted(reads.by_family.items()):
        waiting.add_metric([family], count)
    remaining = _gauge("queue_remaining", "Prompts waiting or running, as clients see it")
    remaining.add_metric([], reads.pending + reads.held)
    entries = _gauge("history_entries", "Finished jobs kept in history")
    entries.add_metric([], reads.history)
    return [up, jobs, waiting, remaining, entries]


@dataclass(frozen=True)
class _QueueReads:
    pending: int
    held: int
    """Jobs claimed by any worker of the farm."""
    history: int
    by_family: Counter[str]


async def _queue_reads(store: JobStore) -> _QueueReads:
    """The queue's lengths: constant-time reads, whatever the queue's length."""
    async with store.redis.pipeline(transaction=False) as pipe:
        pipe.zcard(store.keys.pending)
        pipe.zcard(store.keys.leases)
        pipe.zcard(store.keys.history)
        pending, held, history = await pipe.execute()
    by_family: Counter[str] = Counter()
    for job, count in await store.index.waiting_by_class():
        by_family[job.family] += count
    return _QueueReads(int(pending), int(held), int(history), by_family)


def socket_families(hub: Hub) -> list[Metric]:
    sockets = hub.client_sockets()
    clients = _gauge("websocket_clients", "WebSocket clients connected to this node")
    clients.add_metric([], len(sockets))
    backlog = _gauge(
        "websocket_backlog_max", "Frames waiting to be sent to the slowest client of this node"
    )
    backlog.add_metric([], max((socket.queue.qsize() for socket in sockets), default=0))
    unsent = _gauge("events_unsent", "Events published here, not yet sent to the other nodes")
    unsent.add_metric([], hub.unsent)
    return [clients, backlog, unsent]


def redis_families(redis_health: Callable[[], RedisHealth] | None) -> list[Metric]:
    """The embedded Redis' supervision (nothing when Redis is given by URL)."""
    if redis_health is None:
        return []
    health = redis_health()
    state = _gauge("embedded_redis_state", "1 for the embedded Redis' state", ["state"])
    state.add_metric([health.state], 1)
    restarts = CounterMetricFamily(
        f"{PREFIX}_embedded_redis_restarts", "Restarts of the embedded redis-server"
    )
    restarts.add_metric([], health.restarts)
    return [state, restarts]


_GPU_GAUGES = (
    ("memory_used_bytes", "GPU memory in use", lambda s: s.memory_used_mib * MIB),
    ("memory_total_bytes", "GPU memory in total", lambda s: s.memory_total_mib * MIB),
    ("utilization_ratio", "GPU busy fraction", lambda s: _scaled(s.utilization_pct, 0.01)),
    ("temperature_celsius", "GPU temperature", lambda s: s.temperature_c),
    ("power_watts", "GPU power draw", lambda s: s.power_w),
    ("sm_clock_hertz", "GPU SM clock", lambda s: _scaled(s.sm_clock_mhz, 1e6)),
)


def gpu_families(snapshot: TelemetrySnapshot | None) -> list[Metric]:
    """One gauge per reading per card; without NVML only `gpu_telemetry_available` 0 (no
    zeros that would read as idle cards)."""
    available = _gauge("gpu_telemetry_available", "1 when NVML can be read on this node")
    readable = snapshot is not None and snapshot.available
    available.add_metric([], 1 if readable else 0)
    families: list[Metric] = [available]
    if snapshot is None or not readable:
        return families
    for suffix, help_text, read in _GPU_GAUGES:
        family = _gauge(f"gpu_{suffix}", help_text, ["gpu", "name"])
        for sample in snapshot.gpus.values():
            value = read(sample)
            if value is not None:
                family.add_metric([str(sample.index), sample.name], float(value))
        families.append(family)
    return families


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor
