"""The workers of this node and the tasks that drive them: relays, dispatch, recovery,
the hang watchdog and, for workers this node starts, their supervision.

Also the operations the API needs on workers: interrupting or withdrawing one prompt, and
finding the worker that holds a job or a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any

from gateway import tasks
from gateway.catalog_refresh import CatalogRefresh
from gateway.dispatcher import Dispatcher
from gateway.hub import Hub
from gateway.jobs import JobStore
from gateway.journal import Journal
from gateway.links import Links, WorkerLink, WorkerState
from gateway.liveness import Liveness, LivenessSettings
from gateway.memory import Memory
from gateway.metrics.recorded import Metrics
from gateway.models import JobRecord, JobState
from gateway.recovery import Found, Recovery, probe
from gateway.relay import Relay
from gateway.restarts import RedisRestarts
from gateway.scheduler.policy import Policy
from gateway.status import (
    display_state,
    gpu_names_of,
    learned_fields,
    supervision_fields,
    telemetry_fields,
    vram_of,
)
from gateway.supervision import Supervision
from gateway.validation import FarmCatalog
from gateway.watchdog import Watchdog
from workers.client import WorkerError
from workers.supervisor import Supervisor
from workers.telemetry import Telemetry

log = logging.getLogger(__name__)

RestartWorker = Callable[[WorkerLink], Coroutine[Any, Any, None]]
HEARTBEAT_S = 2.0


class Farm:
    def __init__(
        self,
        store: JobStore,
        hub: Hub,
        links: Links,
        policy: Policy,
        catalog: FarmCatalog,
        *,
        node: str,
        lease_s: float,
        stall_timeout_s: float,
        capacity: int = 2,
        restart: RestartWorker | None = None,
        supervisor: Supervisor | None = None,
        telemetry: Telemetry | None = None,
        interrupt_grace_s: float = 10.0,
        time_scale: float = 1.0,
        journal_s: float = 10.0,
        quarantine_after: int = 2,
        liveness: LivenessSettings | None = None,
        catalog_refresh_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ):
        self.metrics = metrics or Metrics(store.now_ms)
        """What this node counts for `/metrics` (`gateway.metrics`)."""
        self.store = store
        self.hub = hub
        self.links = links
        self.catalog = catalog
        self.catalog_refresh = CatalogRefresh(
            links, catalog, interval_s=catalog_refresh_s, clock=clock
        )
        self.node = node
        self.clock = clock
        self.supervisor = supervisor
        self.telemetry = telemetry
        self.dispatcher = Dispatcher(
            store, links, policy, hub, capacity=capacity, clock=clock, metrics=self.metrics
        )
        self.outcomes = self.dispatcher.outcomes
        self.watchdog = Watchdog(
            self._recover,
            reconnect=self.reconnect,
            restart=self._restart_hung if supervisor is not None else None,
            interrupt_grace_s=interrupt_grace_s,
            clock=clock,
            metrics=self.metrics,
        )
        self.recovery = Recovery(
            store,
            links,
            self.outcomes,
            lease_s=lease_s,
            stall_timeout_s=stall_timeout_s,
            restart=restart,
            on_stall=self.watchdog.examine,
            quarantine_after=quarantine_after,
            clock=clock,
        )
        self.liveness = Liveness(
            links, self.watchdog.hung, liveness, on_change=self.outcomes.wake, clock=clock
        )
        self.journal = Journal(journal_s, clock=clock)
        """What this node accepted lately, in case a Redis restart loses it."""
        self.restarts = RedisRestarts(
            store, links, self.journal, self.dispatcher.paused, clock=clock, metrics=self.metrics
        )
        self.dispatcher.guard = self.restarts
        self.recovery.guard = self.restarts
        self.outcomes.on_end = self.journal.discard
        self.supervision = Supervision(
            store,
            links,
            self.recovery,
            self.outcomes,
            self._publish_registry,
            node=node,
            clock=clock,
        )
        self.memory = Memory(
            store.redis,
            store.keys,
            node=node,
            now_ms=store.now_ms,
            time_scale=time_scale,
            telemetry=telemetry,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._relays: dict[str, asyncio.Task[None]] = {}

    @property
    def draining(self) -> bool:
        return self.supervision.draining

    async def start(self) -> None:
        # Before the dispatcher reads it: Redis written by an older gateway has no index.
        await self.store.index.ensure()
        # Before the warm-ups are taken in: a probe observes into a restored estimate.
        await self.memory.restore(self.links)
        for link in self.links:
            if link.handle.ready:
                await self.catalog_refresh.worker(link)
        self._tasks = [
            tasks.spawn("catalog-refresh", self.catalog_refresh.run),
            asyncio.create_task(self.dispatcher.run(), name="dispatcher"),
            asyncio.create_task(self.recovery.run(), name="recovery"),
            asyncio.create_task(self._heartbeat(), name="registry"),
            tasks.spawn("learned-memory", lambda: self.memory.run(self.links)),
            *self.liveness.spawn(),
        ]
        for link in self.links:
            self._start_relay(link)
        if self.supervisor is not None:
            self.supervision.attach(self.supervisor)
            self.supervisor.start()

    def _start_relay(self, link: WorkerLink) -> None:
        relay = Relay(
            link,
            self.store,
            self.hub,
            self.outcomes,
            self._connected,
            self.clock,
            metrics=self.metrics,
        )
        self._relays[link.name] = asyncio.create_task(relay.run(), name=f"relay-{link.name}")

    def reconnect(self, link: WorkerLink) -> None:
        """Drop the worker's event socket and open a new one (it missed events once)."""
        old = self._relays.get(link.name)
        if old is not None:
            old.cancel()
        self._start_relay(link)

    async def drain(self, grace_s: float) -> None:
        """The node stops: no intake, no dispatch; running jobs get `grace_s` to finish."""
        await self.supervision.drain_node(grace_s)

    async def stop(self) -> None:
        await tasks.stop([*self._tasks, *self._relays.values()])
        await self.dispatcher.stop()
        await self.recovery.stop()
        await self._stop_workers()
        await self.memory.save(self.links)
        for link in self.links:
            link.state = WorkerState.DISCONNECTED
        with contextlib.suppress(Exception):
            await self._publish_registry()
        for link in self.links:
            await link.client.aclose()

    async def _stop_workers(self) -> None:
        """Stop the children this node started; what they held goes back to the queue."""
        if self.supervisor is None:
            return
        self.supervisor.unsubscribe(self.supervision.on_event)
        await self.supervisor.stop_all()
        for link in self.links:
            if not link.handle.managed:
                continue
            try:
                job_ids = set(link.held) | await self.store.worker_job_ids(link.name)
                await self.supervision.release(link, job_ids, failed=False)
            except Exception as exc:
                # Their leases expire; the next node to start recovers them.
                log.warning("jobs of %s not released at stop: %r", link.name, exc)

    async def _restart_hung(self, link: WorkerLink, reason: str) -> None:
        assert self.supervisor is not None
        await self.supervisor.restart(link.name, reason, failure=True)

    async def _recover(self, job_id: str) -> None:
        await self.recovery.recover(job_id, failed=False)

    def groups(self) -> dict[str, str]:
        return {link.name: link.group for link in self.links}

    async def _connected(self, link: WorkerLink) -> None:
        """The relay of `link` is (re)connected: refresh what it offers when it is new or was
        lost (a restarted worker may offer other files), reconcile its jobs."""
        if link.object_info is None or link.state is WorkerState.LOST:
            await self.catalog_refresh.worker(link)
        await self.recovery.reconcile(link)
        log.info("worker %s %s at %s", link.name, link.state, link.url)
        await self._publish_registry()

    # -- registry ----------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            tasks.check_cancelled()
            self._refresh_vram()
            with contextlib.suppress(Exception):
                await self._publish_registry()
            await asyncio.sleep(HEARTBEAT_S)

    def _refresh_vram(self) -> None:
        snapshot = self.telemetry.snapshot() if self.telemetry is not None else None
        for link in self.links:
            link.vram = vram_of(snapshot, link.handle.spec.gpu_indices)
            link.gpu_names = gpu_names_of(snapshot, link.handle.spec.gpu_indices)

    async def _publish_registry(self) -> None:
        now_ms = self.store.now_ms()
        records: dict[Any, Any] = {
            link.name: json.dumps(self.describe(link, now_ms)) for link in self.links
        }
        if records:
            await self.store.redis.hset(self.store.keys.workers, mapping=records)

    def describe(self, link: WorkerLink, now_ms: int) -> dict[str, Any]:
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
            "resident": list(link.resident),
            "load_s": {key: round(value, 3) for key, value in link.load_s.items()},
            "heartbeat_ms": now_ms,
            **supervision_fields(status),
            "telemetry": telemetry_fields(snapshot, handle.spec.gpu_indices),
            "learned": learned_fields(link, self.dispatcher.estimates.of(link)),
            "last_placement": link.last_placement,
        }

    async def registry(self) -> list[dict[str, Any]]:
        """Every worker of the farm; this node's own are refreshed first."""
        await self._publish_registry()
        raw = await self.store.redis.hgetall(self.store.keys.workers)
        return [json.loads(value) for _, value in sorted(raw.items())]

    # -- operations on one prompt ------------------------------------------------------------

    async def interrupt(self, job_id: str) -> None:
        """Stop this prompt only: drop it while it waits, interrupt it where it runs."""
        job = await self.store.get(job_id)
        if job is not None and job.state is JobState.PENDING:
            if await self._cancel_pending(job_id):
                self.hub.queue_changed()
                return
            job = await self.store.get(job_id)
        link = self.links.get(job.worker) if job else None
        if job is None or link is None or job.state.terminal:
            return
        if job.state is JobState.RUNNING or link.running == job_id:
            await link.client.interrupt(job_id)
        else:
            await self._withdraw(link, job, interrupt_if_running=True)

    async def interrupt_client(self, client_id: str) -> list[str]:
        """Interrupt the running prompts of one client (never anyone else's)."""
        stopped = []
        for link in self.links:
            held = link.held.get(link.running) if link.running else None
            if held is not None and held.client_id == client_id and link.running:
                with contextlib.suppress(WorkerError):
                    await link.client.interrupt(link.running)
                    stopped.append(link.running)
        return stopped

    async def delete(self, job_id: str) -> None:
        """POST /queue delete: remove a prompt that has not started, wherever it waits."""
        if await self._cancel_pending(job_id):
            self.hub.queue_changed()
            return
        job = await self.store.get(job_id)
        link = self.links.get(job.worker) if job else None
        if job is not None and link is not None and job.state is JobState.ASSIGNED:
            await self._withdraw(link, job, interrupt_if_running=False)

    async def clear_pending(self, client_ids: Collection[str] | None = None) -> int:
        """POST /queue clear: every prompt of these clients (None: of every client) that has
        not started, also those already sent ahead to a worker of this node (ComfyUI's clear
        empties its whole pending queue)."""
        cancelled = 0
        for job in await self.store.get_many(await self.store.pending_ids()):
            if client_ids is None or job.client_id in client_ids:
                cancelled += await self._cancel_pending(job.job_id)
        for link in self.links:
            for job_id, held in list(link.held.items()):
                mine = client_ids is None or held.client_id in client_ids
                if job_id != link.running and mine:
                    await self.delete(job_id)
        self.hub.queue_changed()
        return cancelled

    async def _cancel_pending(self, job_id: str) -> bool:
        cancelled = await self.store.cancel_pending(job_id)
        if cancelled:
            self.metrics.pending_cancelled()
        return cancelled

    async def _withdraw(
        self, link: WorkerLink, job: JobRecord, *, interrupt_if_running: bool
    ) -> None:
        """A prompt sent to a worker but not started: take it out of that worker's queue."""
        with contextlib.suppress(WorkerError):
            await link.client.delete([job.job_id])
        verdict = await probe(link.client, job.job_id)
        if verdict.found is Found.ABSENT:
            await self.outcomes.cancel(link, job)
        elif verdict.found is Found.HELD and verdict.running and interrupt_if_running:
            await link.client.interrupt(job.job_id)

    def link(self, name: str) -> WorkerLink | None:
        return self.links.get(name)

    def any_ready(self) -> WorkerLink | None:
        ready = self.links.ready()
        return ready[0] if ready else None


def _progress(link: WorkerLink) -> list[int] | None:
    """[value, max] of the running job's sampler steps, when it reported any."""
    held = link.held.get(link.running) if link.running else None
    return list(held.progress) if held is not None and held.progress else None
