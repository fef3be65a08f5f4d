"""One upstream event socket per worker, re-routed to the clients that own the prompts.

The gateway submits every job with `client_id` = the worker's relay sid, so every event of
every job reaches the relay; it forwards each to the owning client's channel by `prompt_id`.
Upstream `status` frames are dropped (the farm sends its own). Binary previews carry a
prompt id only in the metadata format (which the relay asks for); others go to the prompt the
worker runs, since a worker runs one prompt at a time. Events of prompts this worker no
longer holds (a superseded attempt) are ignored.

Every connection uses a fresh sid: ComfyUI unregisters a sid when an old socket with that sid
closes, even after a newer socket took the sid over, so reusing one could leave the relay deaf.
The price: prompts sent under an earlier sid (before a reconnect or a gateway restart) send
their events nowhere; the recovery sweep polls the worker for those until they finish.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from gateway import tasks
from gateway.dispatch.links import Held, WorkerLink, WorkerState
from gateway.dispatch.outcomes import TERMINAL_KINDS, Outcomes
from gateway.events.frames import BROADCAST, ClientFrame, preview_prompt_id, text_frame
from gateway.events.hub import Hub
from gateway.jobs.history import namespace_output
from gateway.jobs.store import JobStore
from gateway.learning import timing
from gateway.metrics.recorded import Metrics
from workers.client import Frame, WorkerError
from workers.comfy.messages import EventKind

log = logging.getLogger(__name__)

FEATURE_FLAGS = {"supports_preview_metadata": True}
# What ComfyUI sends to every socket when the prompt has no client_id; the rest it drops.
BROADCAST_WITHOUT_CLIENT = frozenset(
    {EventKind.PROGRESS, EventKind.PROGRESS_STATE, EventKind.EXECUTION_INTERRUPTED}
)
Reconcile = Callable[[WorkerLink], Awaitable[None]]


def relay_sid(worker: str) -> str:
    """A new sid for one connection of this worker's relay."""
    return f"comfy-gateway.{worker}.{uuid.uuid4().hex[:12]}"


class Relay:
    """Runs the event socket of one worker until cancelled, reconnecting with backoff."""

    def __init__(
        self,
        link: WorkerLink,
        store: JobStore,
        hub: Hub,
        outcomes: Outcomes,
        on_connect: Reconcile,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ):
        self.metrics = metrics or Metrics()
        self.link = link
        self.store = store
        self.hub = hub
        self.outcomes = outcomes
        self.on_connect = on_connect
        self.clock = clock
        self._writes: set[asyncio.Task[Any]] = set()

    async def run(self) -> None:
        backoff_s = 0.1
        while True:
            tasks.check_cancelled()
            try:
                await self._session()
                backoff_s = 0.1
            except WorkerError as exc:
                log.info("relay %s: %s", self.link.name, exc)
            except Exception as exc:
                # Redis down, a malformed frame...: the relay must outlive it. What it missed,
                # the lease sweep and the reconcile on reconnect recover.
                log.warning("relay %s dropped: %r", self.link.name, exc)
            if self.link.state is WorkerState.READY:
                self.link.state = WorkerState.DISCONNECTED
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 2.0)

    async def _session(self) -> None:
        self.link.sid = relay_sid(self.link.name)
        async with self.link.client.events(self.link.sid, FEATURE_FLAGS) as frames:
            self.link.listening = True
            try:
                await self.on_connect(self.link)
                await self._relay(frames)
            finally:
                self.link.listening = False

    async def _relay(self, frames: AsyncIterator[Frame]) -> None:
        """Handle every frame in order, each timed when it arrived: a reader keeps taking
        frames off the socket while one is handled. Handling the end of a prompt waits for
        its history and its record in Redis; the prompt prefetched behind it starts at once,
        and its first nodes and steps, read only afterwards, came in a burst: its sampler
        looked up to 7x faster than it ran, and the card was learned as faster than it is."""
        arrived: asyncio.Queue[tuple[Frame, float] | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read(frames, arrived), name=f"read-{self.link.name}")
        try:
            # Frames already read come without a suspension, and handling one rarely
            # suspends: a busy worker's stream would otherwise hold the event loop.
            turns = tasks.Turns()
            while (item := await arrived.get()) is not None:
                tasks.check_cancelled()
                await self.handle(*item)
                await turns.take()
            await reader  # what ended the socket, raised here
        finally:
            await tasks.stop([reader])

    async def _read(
        self, frames: AsyncIterator[Frame], arrived: asyncio.Queue[tuple[Frame, float] | None]
    ) -> None:
        """Every frame with the instant it was read; None once the socket ended."""
        turns = tasks.Turns()
        try:
            async for frame in frames:
                arrived.put_nowait((frame, self.clock()))
                await turns.take()
        finally:
            arrived.put_nowait(None)

    async def handle(self, frame: Frame, at_s: float | None = None) -> None:
        """One frame of the worker, read at `at_s` (on `clock`; None: now)."""
        at_s = self.clock() if at_s is None else at_s
        if isinstance(frame, bytes):
            self._binary(frame)
        else:
            await self._text(frame, at_s)

    def _binary(self, frame: bytes) -> None:
        prompt_id = preview_prompt_id(frame) or self.link.running
        held = self.link.held.get(prompt_id) if prompt_id else None
        if held is not None:
            self.hub.publish_live(ClientFrame(held.client_id or BROADCAST, data=frame))

    async def _text(self, message: dict[str, Any], at_s: float) -> None:
        kind = message.get("type")
        data = message.get("data")
        if kind == EventKind.STATUS:
            return  # the worker's own queue; clients get the farm's (Hub.announce_queue)
        if not isinstance(data, dict) or not data.get("prompt_id"):
            return
        prompt_id = str(data["prompt_id"])
        held = self.link.held.get(prompt_id)
        if held is None:
            return
        self.link.last_progress_s = at_s
        self.metrics.relay_event(self.link.name, data.get("timestamp"))
        self._time(held, kind, data, at_s)
        held.heard.hear(str(kind), data)
        if kind == EventKind.EXECUTING and data.get("node") is None:
            await self._finished(prompt_id, held)
            return
        if kind == EventKind.EXECUTION_START:
            self.link.running = prompt_id
            held.started_at_ms = self.store.now_ms()
            # Not awaited: the event need not wait for Redis, and START is a no-op once the
            # job has finished.
            self._background(self.store.mark_started(prompt_id, held.attempt))
            # ComfyUI announces its queue as a prompt leaves it, just before execution_start.
            await self.hub.announce_queue(always=True)
        elif kind == EventKind.PROGRESS:
            held.progress = _steps(data)
        elif kind == EventKind.EXECUTED and isinstance(data.get("output"), dict):
            data = {**data, "output": namespace_output(data["output"], self.link.name)}
            message = {"type": kind, "data": data}
        elif kind in TERMINAL_KINDS:
            return  # told from the recorded entry (`Outcomes.complete`), once, never live
        self._forward(held, message)

    def _time(self, held: Held, kind: object, data: dict[str, Any], at_s: float) -> None:
        """Node times for learning (`gateway.learning.timing`): `executing` transitions,
        `execution_cached`, sampler `progress`, the worker's start and end stamps."""
        if kind == EventKind.EXECUTION_START:
            held.clock = timing.started(data, at_s)
        elif held.clock is not None:
            held.clock = timing.on_event(held.clock, kind, data, at_s)

    def _background(self, write: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: asyncio.Task[Any]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("relay %s: background write failed: %r", self.link.name, task.exception())

    def _forward(self, held: Held, message: dict[str, Any]) -> None:
        kind = str(message["type"])
        if held.client_id:
            self.hub.publish_live(text_frame(held.client_id, kind, message["data"]))
        elif kind in BROADCAST_WITHOUT_CLIENT:
            self.hub.publish_live(text_frame(BROADCAST, kind, message["data"]))

    async def _finished(self, prompt_id: str, held: Held) -> None:
        """ComfyUI wrote its history entry before this frame: fetch it, record it, then tell."""
        held.ended = True
        if self.link.running == prompt_id:
            self.link.running = None  # the worker has moved on, whatever happens to the fetch
        try:
            entry = await self.link.client.history(prompt_id)
        except WorkerError as exc:
            # Leave the job held: the lease sweep asks the worker again.
            log.warning("history of %s from %s unavailable: %s", prompt_id, self.link.name, exc)
            return
        await self.outcomes.complete(self.link, prompt_id, held, entry)


def _steps(data: dict[str, Any]) -> tuple[int, int] | None:
    value, most = data.get("value"), data.get("max")
    if isinstance(value, int) and isinstance(most, int) and most > 0:
        return value, most
    return None
