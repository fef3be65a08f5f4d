"""The farm's worker registry in Redis: what each worker of every node is doing.

Each node publishes one record per worker it reaches (`describe`) on a heartbeat and after
every change it sees; `/gateway/workers` reads them all back (`records`). A record not
refreshed for `STALE_REGISTRY_MS` no longer counts as a node serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from gateway import tasks
from gateway.dispatch.estimated import FarmEstimates
from gateway.dispatch.links import Links, WorkerLink
from gateway.farm.describe import (
    display_state,
    gpu_names_of,
    learned_fields,
    supervision_fields,
    telemetry_fields,
    vram_of,
)
from gateway.jobs.store import JobStore
from workers.supervision.supervisor import Supervisor
from workers.telemetry import Telemetry

HEARTBEAT_S = 2.0
STALE_REGISTRY_MS = 10_000
"""A worker record older than this is not taken as another node serving."""


class Registry:
    def __init__(
        self,
        store: JobStore,
        links: Links,
        estimates: FarmEstimates,
        *,
        node: str,
        supervisor: Supervisor | None = None,
        telemetry: Telemetry | None = None,
    ):
        self.store = store
        self.links = links
        self.estimates = estimates
        self.node = node
        self.supervisor = supervisor
        self.telemetry = telemetry

    async def run(self) -> None:
        """Refresh this node's records every `HEARTBEAT_S` (a Redis error skips one beat)."""
        while True:
            tasks.check_cancelled()
            self._refresh_vram()
            with contextlib.suppress(Exception):
                await self.publish()
            await asyncio.sleep(HEARTBEAT_S)

    def _refresh_vram(self) -> None:
        snapshot = self.telemetry.snapshot() if self.telemetry is not None else None
        for link in self.links:
            link.vram = vram_of(snapshot, link.handle.spec.gpu_indices)
            link.gpu_names = gpu_names_of(snapshot, link.handle.spec.gpu_indices)

    async def publish(self) -> None:
        """Write the record of every worker of this node."""
        now_ms = self.store.now_ms()
        records: dict[Any, Any] = {
            link.name: json.dumps(self.describe(link, now_ms)) for link in self.links
        }
        if records:
            await self.store.redis.hset(self.store.keys.workers, mapping=records)

    def describe(self, link: WorkerLink, now_ms: int) -> dict[str, Any]:
        """The record of one worker of this node, as `/gateway/workers` shows it."""
        handle = link.handle
        status = self.supervisor.status(link.name) if self.supervisor is not None else None
        snapshot = self.telemetry.snapshot() if self.telemetry is not None else None
        return {
            "name": link.name,
            "group": link.group,
            "url": link.url,
            "pid": handle.pid,
            "gpu": handle.spec.gpu,
            "emulated": handle.spec.emulate is not None,
            "managed": handle.managed,
            "state": display_state(link, status),
            "draining": link.draining,
            "node": self.node,
            "running": link.running,
            "progress": _progress(link),
            "held": sorted(link.held),
            "last_checkpoint": link.last_checkpoint,
            "cold": link.cold,
            "warming": link.warming.checkpoint if link.warming else None,
            "last_warm_up": link.last_warm_up,
            "resident": list(link.resident),
            "load_s": {key: round(value, 3) for key, value in link.load_s.items()},
            "heartbeat_ms": now_ms,
            **supervision_fields(status),
            "telemetry": telemetry_fields(snapshot, handle.spec.gpu_indices),
            "learned": learned_fields(link, self.estimates.of(link)),
            "last_placement": link.last_placement,
        }

    async def records(self) -> list[dict[str, Any]]:
        """Every worker of the farm; this node's own are refreshed first."""
        await self.publish()
        raw = await self.store.redis.hgetall(self.store.keys.workers)
        return [json.loads(value) for _, value in sorted(raw.items())]

    async def other_node_serving(self) -> bool:
        """Whether another gateway node has a ready worker (so new prompts can wait in Redis)."""
        raw = await self.store.redis.hgetall(self.store.keys.workers)
        now_ms = self.store.now_ms()
        for value in raw.values():
            record = json.loads(value)
            if (
                record.get("node") != self.node
                and record.get("state") == "ready"
                and now_ms - int(record.get("heartbeat_ms", 0)) < STALE_REGISTRY_MS
            ):
                return True
        return False


def _progress(link: WorkerLink) -> list[int] | None:
    """[value, max] of the running job's sampler steps, when it reported any."""
    held = link.held.get(link.running) if link.running else None
    return list(held.progress) if held is not None and held.progress else None
