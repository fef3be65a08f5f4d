"""This node's membership of the farm: its heartbeat, and what it knows of the other nodes.

Every `heartbeat_s` the node renews its registration (its URL, its workers, their lanes and
catalogue digest), reads the others', takes the farm's catalogue from the live ones, and
requeues what lapsed nodes held (`takeover`). A node that could not renew for 3/4 of its
TTL stops claiming jobs and withholds the live events of what it runs (`standing` is false,
`/readyz` says why): the others may soon take over what it holds. When it renews again it
rejoins, and first lets go of the jobs that were taken over meanwhile: its workers are told
to drop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway import tasks
from gateway.dispatch.dispatcher import REDIS_DOWN
from gateway.dispatch.links import Links, WorkerLink
from gateway.dispatch.outcomes import Outcomes
from gateway.farm.catalog import FarmCatalog
from gateway.jobs.models import HELD
from gateway.jobs.store import JobStore
from gateway.peers.lanes import lane_of, lane_record
from gateway.peers.registry import NameTaken, NodeRecord, Registry
from gateway.peers.takeover import OUTCOME, take_over
from gateway.scheduler.snapshot import WorkerView
from workers.client import WorkerError

log = logging.getLogger(__name__)

LocalLanes = Callable[[], Sequence[WorkerView]]
STANDING = 0.75
"""The part of its TTL a node may go unrenewed and still claim: three missed heartbeats."""


def heartbeat_s(ttl_s: float) -> float:
    """How often a node renews a registration that lives `ttl_s`: five times per TTL, at most
    once a second and at least every 50 ms."""
    return min(1.0, max(0.05, ttl_s / 5))


@dataclass(frozen=True)
class NodeAddress:
    """Who this node is to the others: its name, the URL they reach it at, and how long its
    registration lives unrenewed."""

    node: str
    url: str
    ttl_s: float


class Membership:
    def __init__(
        self,
        store: JobStore,
        links: Links,
        catalog: FarmCatalog,
        outcomes: Outcomes,
        *,
        address: NodeAddress,
        local_lanes: LocalLanes,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.links = links
        self.catalog = catalog
        self.outcomes = outcomes
        self.node, self.url, self.ttl_s = address.node, address.url, address.ttl_s
        self.local_lanes = local_lanes
        self.clock = clock
        self.registry = Registry(store.redis, store.keys, address.ttl_s)
        self.peers: dict[str, NodeRecord] = {}
        """The other live nodes, as of the latest heartbeat."""
        self.renewed_at_s: float | None = None
        self.problem: str | None = None
        """Why the latest renewal failed; None once it succeeded."""
        self._published: tuple[tuple[str, int], ...] | None = None
        self._digest = ""
        self._loaded: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    # -- what the others ask -----------------------------------------------------------------

    @property
    def standing(self) -> bool:
        """Renewed within `STANDING` of the TTL: this node may claim jobs (the others take
        over only once the whole TTL has passed)."""
        if self.renewed_at_s is None or self.problem is not None:
            return False
        return self.clock() - self.renewed_at_s < self.ttl_s * STANDING

    def lanes(self) -> tuple[WorkerView, ...]:
        """The accepting workers of the other live nodes, as their last heartbeat showed them
        (what they held then, that much nearer done)."""
        now_ms = self.store.now_ms()
        mine = {link.name for link in self.links}
        out = []
        for peer in self.peers.values():
            age_s = (now_ms - peer.heartbeat_ms) / 1000
            for record in peer.lanes:
                try:
                    view = lane_of(record, age_s)
                except (KeyError, TypeError, ValueError):
                    continue
                if view.name not in mine:
                    out.append(view)
        return tuple(out)

    def groups(self) -> dict[str, str]:
        """The config group of every worker of the farm (this node's and the live others')."""
        out = {name: group for peer in self.peers.values() for name, group in peer.groups.items()}
        return {**out, **{link.name: link.group for link in self.links}}

    def node_of(self, worker: str) -> NodeRecord | None:
        """The live node that owns `worker` (never this one)."""
        return next((peer for peer in self.peers.values() if worker in peer.workers), None)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the farm before any job is claimed. A worker name that another node holds is
        waited on for one TTL (that node may have just died: this one, restarted); raises
        `NameTaken` when it is still held then."""
        deadline_s = self.clock() + self.ttl_s + heartbeat_s(self.ttl_s)
        while True:
            try:
                await self.registry.join(self._record())
                break
            except NameTaken as exc:
                if self.clock() >= deadline_s:
                    raise
                log.info("%s; waiting for its registration to lapse", exc)
                await asyncio.sleep(heartbeat_s(self.ttl_s))
        self.renewed_at_s = self.clock()
        log.info("node %s joined the farm at %s", self.node, self.url)
        self._task = tasks.spawn("membership", self.run)

    async def stop(self) -> None:
        if self._task is not None:
            await tasks.stop([self._task])
        with contextlib.suppress(Exception):
            await self.registry.leave(self.node)

    async def run(self) -> None:
        while True:
            tasks.check_cancelled()
            await self.beat()
            await asyncio.sleep(heartbeat_s(self.ttl_s))

    async def beat(self) -> None:
        """One heartbeat: renew, then read the others and take over what lapsed nodes held."""
        try:
            await self._publish_catalog()  # first: the registration names its digest
            await self._renew()
            lapsed = await self._read_peers()
            await take_over(self.store, self.outcomes, self.registry, lapsed, self._names())
        except NameTaken as exc:
            self._failed(str(exc))
        except REDIS_DOWN as exc:
            self._failed(f"cannot renew this node's registration in Redis: {exc}")
        except Exception:
            log.exception("node heartbeat failed")

    def _failed(self, problem: str) -> None:
        if self.problem != problem:
            log.warning("node %s: %s; not claiming jobs", self.node, problem)
        self.problem = problem

    async def _renew(self) -> None:
        lapsed = self.renewed_at_s is None or self.clock() - self.renewed_at_s >= self.ttl_s
        renewed_at_s = self.clock()
        await self.registry.join(self._record())
        if lapsed:  # still not standing meanwhile: no claims, no events of those jobs
            await self._let_go_of_superseded()
        self.renewed_at_s = renewed_at_s
        if self.problem is not None:
            log.info("node %s renewed its registration again", self.node)
            self.problem = None

    def _record(self) -> NodeRecord:
        return NodeRecord(
            name=self.node,
            url=self.url,
            heartbeat_ms=self.store.now_ms(),
            workers={link.name: str(link.state) for link in self.links},
            groups={link.name: link.group for link in self.links},
            lanes=[lane_record(view) for view in self.local_lanes()],
            catalog_digest=self._digest,
        )

    def _names(self) -> set[str]:
        return {link.name for link in self.links}

    # -- the catalogue -----------------------------------------------------------------------

    async def _publish_catalog(self) -> None:
        infos = {link.name: link.object_info for link in self.links if link.object_info}
        shown = tuple(sorted((name, id(info)) for name, info in infos.items()))
        if shown != self._published:
            self._digest = _digest(infos)
            await self.registry.publish_catalog(self.node, infos)
            self._published = shown
        elif not await self.registry.keep_catalog(self.node):
            await self.registry.publish_catalog(self.node, infos)

    async def _read_peers(self) -> list[str]:
        """Read the live nodes' registrations (and catalogues when they changed); the names of
        the lapsed ones."""
        live, lapsed = await self.registry.nodes()
        self.peers = {peer.name: peer for peer in live if peer.name != self.node}
        digests = {name: peer.catalog_digest for name, peer in self.peers.items()}
        if digests != self._loaded:
            infos: dict[str, Any] = {}
            for name in sorted(self.peers):
                infos.update(await self.registry.catalog(name))
            self.catalog.update_remote(infos)
            self._loaded = digests
            log.info("farm catalogue: %d workers on %d other nodes", len(infos), len(digests))
        return lapsed

    # -- rejoining ---------------------------------------------------------------------------

    async def _let_go_of_superseded(self) -> None:
        """After a lapse: the jobs Redis no longer has on this node's workers were taken over;
        tell each worker to drop them, and forget them."""
        for link in self.links:
            for job_id in list(link.held):
                if not await self._still_mine(link, job_id):
                    await _drop(link, job_id)
                    self.outcomes.wake()

    async def _still_mine(self, link: WorkerLink, job_id: str) -> bool:
        """False only when Redis shows the job taken from this worker: a later attempt,
        ended, or requeued by a take-over. A job Redis lost, or whose claim it lost (a Redis
        restart that lost writes), is left to the restart's repair."""
        job = await self.store.get(job_id)
        held = link.held.get(job_id)
        if job is None or held is None:
            return True
        if job.attempt < held.attempt:
            return True  # Redis lost the claim: the restart's repair reasserts it
        if job.attempt > held.attempt or job.state.terminal:
            return False
        if job.state in HELD:
            return job.worker == link.name
        attempts = await self.store.attempts(job_id)
        last = attempts[held.attempt - 1] if len(attempts) >= held.attempt > 0 else {}
        return last.get("outcome") != OUTCOME


async def _drop(link: WorkerLink, job_id: str) -> None:
    log.warning("job %s on %s was taken over while this node lapsed: dropped", job_id, link.name)
    link.release(job_id)
    with contextlib.suppress(WorkerError):
        await link.client.delete([job_id])
    with contextlib.suppress(WorkerError):
        await link.client.interrupt(job_id)


def _digest(infos: dict[str, Any]) -> str:
    text = json.dumps(infos, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
