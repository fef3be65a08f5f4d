"""Graceful stop: the first SIGTERM (or SIGINT) drains the gateway before the server stops.

uvicorn stops listening as soon as it gets a signal; a gateway must first stop intake while
still answering (`/readyz` fails, `POST /prompt` gets 503 with Retry-After unless another node
serves the farm) and let running jobs finish. So the signal starts the drain, and the server
stops when the drain is over; a second signal stops it at once, a third forces it. The app's
lifespan then stops the children and puts what they still held back in the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]]):
        super().__init__(config)
        self._drain = drain
        self._draining: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)  # type: ignore[arg-type]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not recorded as uvicorn records it: it re-raises recorded signals after serving,
        # which would kill the process before the exit stack (Redis, workers) unwinds.
        if self._draining is None and self._loop is not None and self.started:
            log.info("signal %d: draining; send it again to stop at once", sig)
            self._loop.call_soon_threadsafe(self._begin_drain)
        elif self.should_exit:
            self.force_exit = True
        else:
            self.should_exit = True

    def _begin_drain(self) -> None:
        if self._draining is None:
            self._draining = asyncio.create_task(self._drain_then_exit(), name="drain")

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain()
        except Exception:
            log.exception("drain failed; stopping anyway")
        finally:
            self.should_exit = True
