"""The client side of events: the sockets connected to this node, and the Redis channel.

`publish` queues an event; one task sends queued events to Redis in order, several per round
trip. One listener task receives every event of the farm and hands each frame to the sockets
of its client only, through a bounded queue per socket (a slow client is dropped, never
allowed to stall the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from gateway.events import (
    ClientFrame,
    Envelope,
    QueueStatus,
    decode,
    encode,
    origin_of,
    preview_without_metadata,
    status_message,
)

log = logging.getLogger(__name__)

Outgoing = str | bytes | None
QUEUE_LIMIT = 10_000


@dataclass(eq=False)
class ClientSocket:
    """One downstream socket; `queue` is drained by the socket's writer (None: close)."""

    client_id: str
    previews_with_metadata: bool = False
    queue: asyncio.Queue[Outgoing] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_LIMIT)
    )
    dropped: bool = False

    def offer(self, item: Outgoing) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            log.warning("client %s too slow, dropping its socket", self.client_id)
            self.dropped = True
            self.queue = asyncio.Queue()
            self.queue.put_nowait(None)

    def deliver(self, frame: ClientFrame) -> None:
        if frame.text is not None:
            self.offer(frame.text)
        elif frame.data is not None:
            data = (
                frame.data if self.previews_with_metadata else preview_without_metadata(frame.data)
            )
            self.offer(data)


class Hub:
    """Publishes events to Redis and delivers the farm's events to local sockets."""

    def __init__(
        self,
        redis: aioredis.Redis,
        channel: str,
        queue_remaining: Callable[[], Awaitable[int]],
        status_interval_s: float = 0.1,
    ):
        self.redis = redis
        self.channel = channel
        self.queue_remaining = queue_remaining
        self.status_interval_s = status_interval_s
        self.sockets: dict[str, set[ClientSocket]] = {}
        self.last_queue_remaining = 0
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._queue_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed = asyncio.Event()
        self.origin = os.urandom(8)
        self.peers = True
        """Whether another node listens; while none does, nothing is published to Redis."""

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen(), name="hub-listen"),
            asyncio.create_task(self._send(), name="hub-send"),
            asyncio.create_task(self._status(), name="hub-status"),
            asyncio.create_task(self._watch_peers(), name="hub-peers"),
        ]
        await asyncio.wait_for(self._subscribed.wait(), 10)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for sockets in self.sockets.values():
            for socket in sockets:
                socket.offer(None)

    # -- local sockets -----------------------------------------------------------------------

    def attach(self, socket: ClientSocket) -> None:
        self.sockets.setdefault(socket.client_id, set()).add(socket)

    def detach(self, socket: ClientSocket) -> None:
        """Forget this socket only: another socket of the same client stays registered."""
        sockets = self.sockets.get(socket.client_id)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self.sockets[socket.client_id]

    # -- producing ---------------------------------------------------------------------------

    def publish(self, event: Envelope) -> None:
        """Deliver to this node's sockets now, and queue for the other nodes (in order)."""
        self.deliver(event)
        if self.peers:
            self._outbox.put_nowait(encode(event, self.origin))

    def queue_changed(self) -> None:
        self._queue_changed.set()

    async def _send(self) -> None:
        while True:
            batch = [await self._outbox.get()]
            while not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            await self._send_batch(batch)

    async def _send_batch(self, batch: list[bytes]) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for raw in batch:
                    pipe.publish(self.channel, raw)
                await pipe.execute()
        except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
            log.warning("lost %d events: redis unavailable (%s)", len(batch), exc)

    async def _watch_peers(self, interval_s: float = 1.0) -> None:
        """Count the channel's subscribers: more than this node means peers to publish to.

        A node that joins is seen within `interval_s`; until then it may miss events of jobs
        that run on other nodes (its own are delivered locally in any case).
        """
        while True:
            with contextlib.suppress(aioredis.ConnectionError, aioredis.TimeoutError):
                counts = await self.redis.pubsub_numsub(self.channel)
                self.peers = any(int(count) > 1 for _, count in counts)
            await asyncio.sleep(interval_s)

    async def _status(self) -> None:
        while True:
            await self._queue_changed.wait()
            self._queue_changed.clear()
            if self.sockets or self.peers:
                with contextlib.suppress(aioredis.ConnectionError, aioredis.TimeoutError):
                    self.publish(QueueStatus(await self.queue_remaining()))
            await asyncio.sleep(self.status_interval_s)

    # -- consuming ---------------------------------------------------------------------------

    async def _listen(self) -> None:
        while True:
            try:
                await self._listen_once()
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
                log.warning("event channel lost (%s); resubscribing", exc)
                await asyncio.sleep(0.5)

    async def _listen_once(self) -> None:
        async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self.channel)
            self._subscribed.set()
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is not None and message.get("type") == "message":
                    self.dispatch(message["data"])

    def dispatch(self, raw: bytes) -> None:
        if origin_of(raw) != self.origin:
            self.deliver(decode(raw))

    def deliver(self, event: Envelope | None) -> None:
        if isinstance(event, ClientFrame):
            for socket in self.sockets.get(event.client_id, ()):
                socket.deliver(event)
        elif isinstance(event, QueueStatus):
            self._broadcast_status(event.queue_remaining)

    def _broadcast_status(self, queue_remaining: int) -> None:
        if queue_remaining == self.last_queue_remaining:
            return
        self.last_queue_remaining = queue_remaining
        text = status_message(queue_remaining)
        for sockets in self.sockets.values():
            for socket in sockets:
                socket.offer(text)
