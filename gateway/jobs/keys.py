"""Every Redis key the gateway uses, in one place.

All keys share a prefix (`cg` by default) so one Redis can hold several farms.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = "cg"

    @property
    def counter(self) -> str:
        """INCR: the farm-wide `number` of accepted prompts."""
        return f"{self.prefix}:counter"

    @property
    def pending(self) -> str:
        """ZSET job id -> queue score (priority, then number): jobs waiting for a worker."""
        return f"{self.prefix}:pending"

    @property
    def queue_classes(self) -> str:
        """HASH group key (`queue_group`) -> class key (`queue.class_key`): one field per group
        that has waiting jobs, none for an empty one. With `queue_work`, `queue_arrivals` and
        `queue_jobs`, the group index, kept in step with `pending` by every script that
        changes it."""
        return f"{self.prefix}:queue:classes"

    @property
    def queue_work(self) -> str:
        """HASH group key -> summed work units of its waiting jobs, in millionths (an integer,
        so adding and removing jobs never drifts)."""
        return f"{self.prefix}:queue:work"

    @property
    def queue_arrivals(self) -> str:
        """HASH group key -> summed `enqueued_at_ms` of its waiting jobs (an integer)."""
        return f"{self.prefix}:queue:arrivals"

    @property
    def queue_jobs(self) -> str:
        """HASH job id -> "priority enqueued_at_ms number work_units" of each waiting job:
        what a group shows of its first jobs, read in one call per group."""
        return f"{self.prefix}:queue:jobs"

    @property
    def queue_index(self) -> list[str]:
        """The group index's hashes, in the order every script takes them (last in KEYS)."""
        return [self.queue_classes, self.queue_work, self.queue_arrivals, self.queue_jobs]

    def queue_group(self, class_key: str) -> str:
        """ZSET job id -> queue score (as in `pending`): the waiting jobs of one class, named
        by a digest of its class key (which may be long). Each job hash names its group."""
        digest = hashlib.sha256(class_key.encode()).hexdigest()[:32]
        return f"{self.prefix}:queue:group:{digest}"

    @property
    def leases(self) -> str:
        """ZSET job id -> lease deadline (ms): jobs held by a worker (sent or running)."""
        return f"{self.prefix}:leases"

    @property
    def history(self) -> str:
        """ZSET job id -> history sequence: finished jobs, oldest first."""
        return f"{self.prefix}:history"

    @property
    def history_seq(self) -> str:
        return f"{self.prefix}:history:seq"

    @property
    def ledgers(self) -> str:
        """LIST of the latest job ledgers (JSON), newest first, as long as the history."""
        return f"{self.prefix}:ledgers"

    @property
    def experiments(self) -> str:
        """HASH experiment name -> JSON (`gateway.ledger.experiments`), those added by the API."""
        return f"{self.prefix}:experiments"

    @property
    def workers(self) -> str:
        """HASH worker name -> JSON registry record (url, group, gpu, pid, state, node...)."""
        return f"{self.prefix}:workers"

    @property
    def learned(self) -> str:
        """HASH worker name -> JSON of what was learned about it (`gateway.farm.learned_store`)."""
        return f"{self.prefix}:learned"

    @property
    def events(self) -> str:
        """Pub/sub channel carrying every client-bound frame (see gateway.events.frames)."""
        return f"{self.prefix}:events"

    def job(self, job_id: str) -> str:
        """HASH: the job record (prompt, client, state, attempt, worker, timestamps...)."""
        return f"{self.prefix}:job:{job_id}"

    def attempts(self, job_id: str) -> str:
        """LIST of JSON attempt records, one per claim."""
        return f"{self.prefix}:job:{job_id}:attempts"

    def entry(self, job_id: str) -> str:
        """STRING: the job's history entry (ComfyUI's shape plus a `gateway` block)."""
        return f"{self.prefix}:entry:{job_id}"

    def worker_jobs(self, worker: str) -> str:
        """SET of job ids a worker holds (sent to it, not finished)."""
        return f"{self.prefix}:worker:{worker}:jobs"

    def browser_clients(self, browser: str) -> str:
        """ZSET client id -> when last seen (ms): the WebSocket `clientId`s one browser opened
        (`gateway.api.browsers`)."""
        return f"{self.prefix}:browser:{browser}:clients"

    def idempotency(self, key: str) -> str:
        """STRING: JSON {job_id, body_sha256} for an Idempotency-Key."""
        return f"{self.prefix}:idem:{key}"

    @property
    def nodes(self) -> str:
        """SET of the names of gateway nodes that registered (live or lapsed: each one's
        `node` key says which)."""
        return f"{self.prefix}:nodes"

    def node(self, name: str) -> str:
        """STRING with a TTL: one gateway node's registration (JSON: url, workers, lanes,
        catalogue digest), renewed by its heartbeat; gone once the node lapsed."""
        return f"{self.prefix}:node:{name}"

    def node_catalog(self, name: str) -> str:
        """STRING with the node's TTL: JSON object_info of each of its workers, by name."""
        return f"{self.prefix}:node:{name}:catalog"

    @property
    def worker_nodes(self) -> str:
        """HASH worker name -> the node that owns it: who may settle the jobs it holds."""
        return f"{self.prefix}:worker-nodes"
