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

from gateway import tasks
from gateway.events.frames import (
    BROADCAST,
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
        """The queue length this node last announced or received (status frames repeat it)."""
        self._status_lock = asyncio.Lock()
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._queue_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed = asyncio.Event()
        self.origin = os.urandom(8)
        self.peers = True
        """Whether another node listens; while none does, nothing is published to Redis."""
        self.standing: Callable[[], bool] = _always
        """Whether this node is in the farm (`gateway.peers.membership`)."""
        self.on_remote_queue: Callable[[], None] = _ignore
        """Told when another node announces the queue's length (it accepted or ended a
        prompt): this node's dispatcher looks at the queue then, not at its next poll."""

    async def start(self) -> None:
        self._tasks = [
            tasks.spawn("hub-listen", self._listen),
            tasks.spawn("hub-send", self._send),
            tasks.spawn("hub-status", self._status),
            tasks.spawn("hub-peers", self._watch_peers),
        ]
        async with asyncio.timeout(10):
            await self._subscribed.wait()

    async def stop(self) -> None:
        await tasks.stop(self._tasks)
        for sockets in self.sockets.values():
            for socket in sockets:
                socket.offer(None)

    # -- local sockets -----------------------------------------------------------------------

    def client_sockets(self) -> list[ClientSocket]:
        return [socket for sockets in self.sockets.values() for socket in sockets]

    @property
    def unsent(self) -> int:
        """Events published here and not yet sent to Redis (for the other nodes)."""
        return self._outbox.qsize()

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

    def publish_live(self, event: Envelope) -> None:
        """A worker's live event (progress, previews): published unless this node is not
        `standing`, for what it runs may then be taken over and run elsewhere, and a client
        hears a prompt from one node only. (A job's end is published after its fenced write,
        which only one attempt passes.)"""
        if self.standing():
            self.publish(event)

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

    async def announce_queue(self, *, always: bool = False) -> None:
        """Broadcast the farm's queue length now, as ComfyUI does when its queue changes (and,
        with `always`, when a prompt starts: ComfyUI repeats the length then).

        Awaited before the event that follows in ComfyUI's order (`execution_start`,
        `executing` null). Reads and sends are serialised, so a later status never carries an
        older length; an unchanged length is sent only with `always`.
        """
        if not (self.sockets or self.peers):
            return
        async with self._status_lock:
            try:
                remaining = await self.queue_remaining()
            except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                log.warning("no status broadcast: redis unavailable (%s)", exc)
                return
            if always or remaining != self.last_queue_remaining:
                self.publish(QueueStatus(remaining))

    async def _status(self) -> None:
        """Changes that need no exact place in a client's sequence (deletes, clears,
        cancels): announced once they settle, at most every `status_interval_s`."""
        while True:
            tasks.check_cancelled()
            await self._queue_changed.wait()
            self._queue_changed.clear()
            await self.announce_queue()
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
            turns = tasks.Turns()  # the farm's every frame comes this way: leave others turns
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is not None and message.get("type") == "message":
                    self.dispatch(message["data"])
                await turns.take()

    def dispatch(self, raw: bytes) -> None:
        if origin_of(raw) != self.origin:
            event = decode(raw)
            self.deliver(event)
            if isinstance(event, QueueStatus):
                self.on_remote_queue()

    def deliver(self, event: Envelope | None) -> None:
        if isinstance(event, ClientFrame):
            for socket in self._recipients(event.client_id):
                socket.deliver(event)
        elif isinstance(event, QueueStatus):
            self._broadcast_status(event.queue_remaining)

    def _recipients(self, client_id: str) -> list[ClientSocket]:
        if client_id == BROADCAST:
            return self.client_sockets()
        return list(self.sockets.get(client_id, ()))

    def _broadcast_status(self, queue_remaining: int) -> None:
        self.last_queue_remaining = queue_remaining
        text = status_message(queue_remaining)
        for sockets in self.sockets.values():
            for socket in sockets:
                socket.offer(text)


def _ignore() -> None:
    pass


def _always() -> bool:
    return True
