"""Supervision of the embedded Redis, as of a worker: restarted with backoff when it exits
(its AOF keeps the jobs), given up on when it is broken at start or flaps (then `/healthz`
fails, so the service manager restarts the gateway). The pure restart policy is the workers'
(`workers.supervision.restart`); Redis' restart itself is noticed and repaired by
`gateway.recovery.redis_repair`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway import tasks
from gateway.redis_server import EmbeddedRedis, RedisServerError
from workers.supervision.restart import (
    ExitRecord,
    GiveUp,
    RestartSettings,
    describe_exit,
    next_restart,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RedisHealth:
    """What `/healthz` and `/readyz` say of the embedded Redis."""

    state: str
    """ready, restarting or failed."""
    restarts: int
    reason: str | None

    @property
    def failed(self) -> bool:
        return self.state == "failed"


class RedisKeeper:
    def __init__(
        self,
        server: EmbeddedRedis,
        settings: RestartSettings,
        *,
        interval_s: float = 0.25,
        start_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.server = server
        self.settings = settings
        self.interval_s = interval_s
        self.start_timeout_s = start_timeout_s
        self.clock = clock
        self.state = "ready"
        self.restarts = 0
        self.reason: str | None = None
        self._started_s = clock()
        self._exits: list[ExitRecord] = []

    def health(self) -> RedisHealth:
        return RedisHealth(self.state, self.restarts, self.reason)

    async def run(self) -> None:
        """Watch the server every `interval_s`; restart it as the policy says, until it is
        given up on (then this returns, the state `failed`)."""
        while self.state != "failed":
            tasks.check_cancelled()
            if not self.server.running:
                await self._exited(became_ready=True)
            await asyncio.sleep(self.interval_s)

    async def _exited(self, *, became_ready: bool) -> None:
        code = self.server.returncode
        now_s = self.clock()
        self._exits.append(ExitRecord(self._started_s, now_s, became_ready, code))
        decision = next_restart(self._exits, now_s, self.settings)
        self.reason = f"redis-server exited ({describe_exit(code)}): {decision.reason}"
        if isinstance(decision, GiveUp):
            log.error("embedded redis failed, not restarting: %s", self.reason)
            self.state = "failed"
            return
        log.warning("embedded %s", self.reason)
        self.state = "restarting"
        await asyncio.sleep(decision.delay_s)
        await self._start()

    async def _start(self) -> None:
        self.restarts += 1
        self._started_s = self.clock()
        self.server.spawn()  # in the loop's thread, which outlives the server
        try:
            await self.server.wait_ready_async(self.start_timeout_s)
        except RedisServerError as exc:
            log.warning("embedded redis did not come back: %s", exc)
            self.server.kill()
            await self._exited(became_ready=False)
            return
        log.info("embedded redis back (pid %s), restart %d", self.server.pid, self.restarts)
        self.state, self.reason = "ready", None
