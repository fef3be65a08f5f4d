"""The registrations of the gateway nodes in Redis: one key per node, with a TTL.

A node joins, and renews its key with each heartbeat, in one script (`scripts.JOIN`) that
also claims its worker names: a name that another live node owns is refused, so two nodes
never settle the jobs of one worker. A node whose key expired has lapsed: its workers no
longer count, and the jobs they held go back to the queue (`gateway.peers.takeover`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from gateway.jobs import lua as scripts
from gateway.jobs.keys import Keys

log = logging.getLogger(__name__)


class NameTaken(Exception):
    """A worker name of this node belongs to another live node."""

    def __init__(self, worker: str, owner: str):
        super().__init__(f"worker name {worker!r} belongs to the live gateway node {owner!r}")
        self.worker = worker
        self.owner = owner


@dataclass(frozen=True)
class NodeRecord:
    """What a node tells the others of itself."""

    name: str
    url: str
    heartbeat_ms: int
    workers: Mapping[str, str] = field(default_factory=dict)
    """Its workers' names and states (`ready`, `starting`, ...)."""
    groups: Mapping[str, str] = field(default_factory=dict)
    """Its workers' config groups, by name."""
    lanes: Sequence[Mapping[str, Any]] = ()
    """What the placement policy sees of each accepting worker (`gateway.peers.lanes`)."""
    catalog_digest: str = ""
    """Changes whenever its workers' catalogue (`node_catalog`) does."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "url": self.url,
                "heartbeat_ms": self.heartbeat_ms,
                "workers": dict(self.workers),
                "groups": dict(self.groups),
                "lanes": list(self.lanes),
                "catalog_digest": self.catalog_digest,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> NodeRecord:
        data = json.loads(text)
        return cls(
            name=str(data["name"]),
            url=str(data["url"]),
            heartbeat_ms=int(data["heartbeat_ms"]),
            workers=dict(data.get("workers", {})),
            groups=dict(data.get("groups", {})),
            lanes=list(data.get("lanes", [])),
            catalog_digest=str(data.get("catalog_digest", "")),
        )


class Registry:
    def __init__(self, redis: aioredis.Redis, keys: Keys, ttl_s: float):
        self.redis = redis
        self.keys = keys
        self.ttl_ms = max(int(ttl_s * 1000), 1)
        self._join = redis.register_script(scripts.JOIN)

    async def join(self, record: NodeRecord) -> None:
        """Register or renew this node for one TTL; raises `NameTaken`."""
        keys = [self.keys.node(record.name), self.keys.nodes, self.keys.worker_nodes]
        args: list[str | int] = [record.name, record.to_json(), self.ttl_ms, self.keys.node("")]
        args += list(record.workers)
        taken = await self._join(keys=keys, args=args)
        if taken:
            raise NameTaken(str(taken[0]), str(taken[1]))

    async def publish_catalog(self, node: str, infos: Mapping[str, Any]) -> None:
        await self.redis.set(self.keys.node_catalog(node), json.dumps(infos), px=self.ttl_ms)

    async def keep_catalog(self, node: str) -> bool:
        """Renew the catalogue's TTL with the node's; False when it is gone (publish again)."""
        return bool(await self.redis.pexpire(self.keys.node_catalog(node), self.ttl_ms))

    async def catalog(self, node: str) -> dict[str, Any]:
        raw = await self.redis.get(self.keys.node_catalog(node))
        infos = json.loads(raw) if raw else {}
        return infos if isinstance(infos, dict) else {}

    async def leave(self, node: str) -> None:
        """This node stops: the others stop counting it at once, and take over what it
        still holds (a stopping node releases its jobs first)."""
        await self.redis.delete(self.keys.node(node), self.keys.node_catalog(node))

    async def nodes(self) -> tuple[list[NodeRecord], list[str]]:
        """(the live nodes' records, the names of the lapsed ones)."""
        names = sorted(str(name) for name in await self.redis.smembers(self.keys.nodes))
        if not names:
            return [], []
        raw = await self.redis.mget([self.keys.node(name) for name in names])
        live, lapsed = [], []
        for name, text in zip(names, raw, strict=True):
            if text is None:
                lapsed.append(name)
                continue
            try:
                live.append(NodeRecord.from_json(str(text)))
            except (ValueError, KeyError, TypeError):
                log.warning("node %s: unreadable registration", name)
        return live, lapsed

    async def owners(self) -> dict[str, str]:
        """Worker name -> the node that owns it (live or lapsed)."""
        raw = await self.redis.hgetall(self.keys.worker_nodes)
        return {str(worker): str(node) for worker, node in raw.items()}

    async def forget(self, node: str) -> None:
        """Drop a lapsed node that owns no worker any more."""
        await self.redis.srem(self.keys.nodes, node)
