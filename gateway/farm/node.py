"""This node's composition root: it builds the parts that drive the workers of this node
(dispatch, relays, recovery, the hang watchdog, liveness, Redis repair, supervision of the
workers it starts, the registry, draining, the API's operations on prompts), wires them,
and starts and stops their tasks. It decides nothing itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway import tasks
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.links import Links, WorkerLink, WorkerState
from gateway.dispatch.relay import Relay
from gateway.events.hub import Hub
from gateway.farm.catalog import FarmCatalog
from gateway.farm.catalog_refresh import CatalogRefresh
from gateway.farm.drain import Drain
from gateway.farm.learned_store import Memory
from gateway.farm.operations import Operations
from gateway.farm.registry import Registry
from gateway.jobs.journal import Journal
from gateway.jobs.store import JobStore
from gateway.metrics.recorded import Metrics
from gateway.recovery.leases import Recovery
from gateway.recovery.lifecycle import Supervision
from gateway.recovery.liveness import Liveness, LivenessSettings
from gateway.recovery.redis_repair import RedisRestarts
from gateway.recovery.watchdog import Watchdog
from gateway.scheduler.policy import ASK_EVERY_S, Policy
from gateway.scheduler.timescale import wall_s
from workers.supervision.supervisor import Supervisor
from workers.telemetry import Telemetry
from workers.warmup.run import warm_up

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FarmSettings:
    """This node's name and the numbers its parts run by (read once from `Settings`)."""

    node: str
    lease_s: float
    stall_timeout_s: float
    capacity: int = 2
    """Jobs one worker holds at once: the one it runs and those prefetched."""
    interrupt_grace_s: float = 10.0
    time_scale: float = 1.0
    journal_s: float = 10.0
    quarantine_after: int = 2
    catalog_refresh_s: float = 60.0
    liveness: LivenessSettings | None = None
    warm_up_s: float | None = 600.0
    """How long a cold worker's warm-up may take (`gateway.scheduler.warming`); None: cold
    workers are not warmed up."""


@dataclass(frozen=True)
class LocalWorkers:
    """What this node runs itself: the supervisor of the workers it starts (None when it
    only fronts workers someone else runs) and the GPU telemetry."""

    supervisor: Supervisor | None = None
    telemetry: Telemetry | None = None


class Farm:
    def __init__(
        self,
        store: JobStore,
        hub: Hub,
        links: Links,
        policy: Policy,
        catalog: FarmCatalog,
        *,
        settings: FarmSettings,
        local: LocalWorkers = LocalWorkers(),
        clock: Callable[[], float] = time.monotonic,
    ):
        node, supervisor, telemetry = settings.node, local.supervisor, local.telemetry
        self.metrics = Metrics(store.now_ms)
        """What this node counts for `/metrics` (`gateway.metrics`)."""
        self.store = store
        self.hub = hub
        self.links = links
        self.catalog = catalog
        self.catalog_refresh = CatalogRefresh(
            links, catalog, interval_s=settings.catalog_refresh_s, clock=clock
        )
        self.node = node
        self.clock = clock
        self.supervisor = supervisor
        self.telemetry = telemetry
        self.dispatcher = Dispatcher(
            store,
            links,
            policy,
            hub,
            capacity=settings.capacity,
            poll_s=wall_s(ASK_EVERY_S, settings.time_scale),
            clock=clock,
            metrics=self.metrics,
        )
        if supervisor is not None and settings.warm_up_s is not None:
            self.dispatcher.warm_up = functools.partial(
                warm_up, timeout_s=settings.warm_up_s, probe_steps=0
            )
        self.outcomes = self.dispatcher.outcomes
        self.watchdog = Watchdog(
            self._recover,
            reconnect=self.reconnect,
            restart=self._restart_hung if supervisor is not None else None,
            interrupt_grace_s=settings.interrupt_grace_s,
            clock=clock,
            metrics=self.metrics,
        )
        self.recovery = Recovery(
            store,
            links,
            self.outcomes,
            lease_s=settings.lease_s,
            stall_timeout_s=settings.stall_timeout_s,
            on_stall=self.watchdog.examine,
            quarantine_after=settings.quarantine_after,
            clock=clock,
        )
        self.liveness = Liveness(
            links, self.watchdog.hung, settings.liveness, on_change=self.outcomes.wake, clock=clock
        )
        self.journal = Journal(settings.journal_s, clock=clock)
        """What this node accepted lately, in case a Redis restart loses it."""
        self.restarts = RedisRestarts(
            store, links, self.journal, self.dispatcher.paused, clock=clock, metrics=self.metrics
        )
        self.dispatcher.guard = self.restarts
        self.recovery.guard = self.restarts
        self.outcomes.on_end = self.journal.discard
        self.registry = Registry(
            store,
            links,
            self.dispatcher.estimates,
            node=node,
            supervisor=supervisor,
            telemetry=telemetry,
        )
        """Every worker's record in Redis (`/gateway/workers`)."""
        self.supervision = Supervision(links, self.recovery, self.outcomes, self.registry.publish)
        self.drain = Drain(links, self.recovery, self.outcomes, clock=clock)
        self.operations = Operations(store, links, hub, self.outcomes, self.metrics)
        """What the API does to one prompt: interrupt, delete, clear."""
        self.memory = Memory(
            store.redis,
            store.keys,
            node=node,
            now_ms=store.now_ms,
            time_scale=settings.time_scale,
            telemetry=telemetry,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._relays: dict[str, asyncio.Task[None]] = {}

    @property
    def draining(self) -> bool:
        """The node drains (it shuts down)."""
        return self.drain.node_draining

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
            asyncio.create_task(self.registry.run(), name="registry"),
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

    async def stop(self) -> None:
        await tasks.stop([*self._tasks, *self._relays.values()])
        await self.dispatcher.stop()
        await self._stop_workers()
        await self.memory.save(self.links)
        for link in self.links:
            link.state = WorkerState.DISCONNECTED
        with contextlib.suppress(Exception):
            await self.registry.publish()
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
        await self.registry.publish()

    def link(self, name: str) -> WorkerLink | None:
        return self.links.get(name)

    def any_ready(self) -> WorkerLink | None:
        ready = self.links.ready()
        return ready[0] if ready else None
