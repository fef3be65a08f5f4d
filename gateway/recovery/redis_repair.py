"""A Redis restart that lost its last writes: notice it, and make Redis agree with this node.

Redis syncs its AOF every second (`appendfsync everysec`), so a crash can lose the last second
of writes it acknowledged. A lost claim leaves a job pending (or on an older attempt) while a
worker of this node runs it, and the dispatcher would send it a second time; a lost enqueue
loses a job whose client already has its prompt_id. Redis' `run_id` is new on every start:
when it changes, dispatch pauses while every job this node holds is reasserted
(`JobStore.reassert_held`) and the jobs the journal says were accepted lately are enqueued
again where Redis lost them.

Checked every `interval_s`, and also on every new connection to Redis (`on_connect`, given to
the client as its `redis_connect_func`): every command after a restart runs on a new connection,
so a restart is suspected before the command that follows, and the dispatcher claims nothing
until Redis is repaired.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.exceptions import RedisError

from gateway.dispatch.links import Links
from gateway.jobs.journal import Journal
from gateway.jobs.store import JobStore
from gateway.metrics.recorded import Metrics

log = logging.getLogger(__name__)

Pause = Callable[[], AbstractAsyncContextManager[None]]


class RedisRestarts:
    """Checks Redis' run id at most every `interval_s` (at once after `suspect`)."""

    def __init__(
        self,
        store: JobStore,
        links: Links,
        journal: Journal,
        pause: Pause,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ):
        self.metrics = metrics or Metrics()
        self.store = store
        self.links = links
        self.journal = journal
        self.pause = pause
        """Holds dispatch rounds off while Redis is repaired."""
        self.interval_s = interval_s
        self.clock = clock
        self.run_id: str | None = None
        """The run id Redis had when this node last agreed with it (the first one seen)."""
        self._checked_s = float("-inf")
        self._suspect = False
        self._down = False
        self._lock = asyncio.Lock()

    @property
    def suspected(self) -> bool:
        """Redis may have restarted since it was last checked: claim nothing now."""
        return self._suspect

    def suspect(self) -> None:
        """A Redis command failed: check before the next round, whatever the interval."""
        self._suspect = True

    async def on_connect(self, connection: Any) -> None:
        """A new connection to Redis (a `redis_connect_func`): set it up as redis-py would,
        then read the server's run id; a new one makes Redis suspect until repaired."""
        await connection.on_connect()
        await connection.send_command("INFO", "server")
        try:
            run_id = run_id_of(await connection.read_response())
        except ValueError:
            return  # no run id: this server cannot tell its restarts
        if self.run_id is not None and run_id != self.run_id:
            self._suspect = True

    async def ready(self) -> bool:
        """True when Redis answers and agrees with this node (repaired first if it restarted);
        False when it does not answer. Redis errors are logged, never raised."""
        if not self._suspect and self.clock() - self._checked_s < self.interval_s:
            return True
        async with self._lock:
            return await self._check()

    async def _check(self) -> bool:
        try:
            run_id = await self.store.run_id()
            if self.run_id is not None and run_id != self.run_id:
                await self.reconcile(run_id)
        except (RedisError, OSError) as exc:
            # Once per outage at warning: both loops ask several times a second.
            log.log(logging.DEBUG if self._down else logging.WARNING, "redis check: %r", exc)
            self._suspect = self._down = True
            return False
        self._down = False
        self.run_id = run_id
        self._checked_s = self.clock()
        self._suspect = False
        return True

    async def reconcile(self, run_id: str) -> None:
        """Redis restarted: no dispatch until it holds what this node holds and knows what
        this node accepted lately."""
        async with self.pause():
            reasserted = await self._reassert_held()
            restored = await self._restore_accepted()
            # The scripts keep it in step, so only a copy from an older gateway lacks it.
            await self.store.index.ensure()
        self.metrics.redis_repairs.inc()
        self.metrics.redis_repaired_jobs.labels("reasserted").inc(reasserted)
        self.metrics.redis_repaired_jobs.labels("restored").inc(restored)
        log.warning(
            "redis restarted (run_id %s, was %s): %d held jobs reasserted, "
            "%d accepted jobs restored",
            run_id,
            self.run_id,
            reasserted,
            restored,
        )

    async def _reassert_held(self) -> int:
        repaired = 0
        for link in self.links:
            for job_id, held in list(link.held.items()):
                if link.held.get(job_id) is not held:
                    continue  # it ended meanwhile
                reply = await self.store.reassert_held(
                    job_id, link.name, held.attempt, held.record, held.started_at_ms
                )
                if reply == 1:
                    log.info("job %s reasserted on %s attempt %d", job_id, link.name, held.attempt)
                repaired += reply == 1
        return repaired

    async def _restore_accepted(self) -> int:
        recent = self.journal.recent()
        floor = max((accepted.counter_floor for accepted in recent), default=0)
        if floor and await self.store.raise_counter(floor):
            log.warning("redis restarted: prompt counter raised back to %d", floor)
        restored = 0
        for accepted in recent:
            job = accepted.job
            if self.links.owner_of(job.job_id) is not None:
                continue  # held here: reasserted above
            if await self.store.restore(job, accepted.enqueued_at_ms, accepted.idempotency):
                log.info("job %s accepted before the restart is queued again", job.job_id)
                restored += 1
        return restored


def run_id_of(info: str | bytes) -> str:
    """The `run_id` line of an INFO server reply."""
    text = info.decode() if isinstance(info, bytes) else info
    for line in text.splitlines():
        if line.startswith("run_id:"):
            return line.removeprefix("run_id:").strip()
    raise ValueError("no run_id in INFO server")
