"""The relay of a worker's events: a backlog of frames leaves the event loop to the others;
frames are timed when they arrive, not when the relay gets round to them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import redis.asyncio as aioredis

from gateway.dispatch.links import Held, WorkerLink
from gateway.dispatch.relay import Relay
from gateway.events.hub import Hub
from gateway.jobs.store import JobStore
from tests.unit.gateway.conftest import FakeClock
from tests.unit.gateway.learning.test_learn import record
from workers.client import ComfyClient, Frame, WorkerUnreachable
from workers.supervision.launch import WorkerHandle, WorkerSpec

FRAMES = 500


class FakeSocket:
    """A worker's event socket (`ComfyClient.events`) whose frames `_frames` makes."""

    @contextlib.asynccontextmanager
    async def events(
        self, client_id: str, feature_flags: Mapping[str, Any] | None = None
    ) -> AsyncIterator[AsyncIterator[Frame]]:
        yield self._frames()

    def _frames(self) -> AsyncIterator[Frame]:
        raise NotImplementedError


class Backlog(FakeSocket):
    """An event socket with `FRAMES` frames already read: each comes without a suspension,
    after 0.2 ms of parsing."""

    def __init__(self) -> None:
        self.read = 0

    async def _frames(self) -> AsyncIterator[Frame]:
        for value in range(FRAMES):
            parsed_at = time.perf_counter() + 0.0002
            while time.perf_counter() < parsed_at:
                pass  # parsing: CPU, no suspension
            self.read += 1
            # a prompt this worker does not hold: handled without a suspension
            yield {"type": "progress", "data": {"prompt_id": "other", "value": value}}


async def test_a_backlog_of_frames_leaves_the_event_loop_to_the_others() -> None:
    handle = WorkerHandle(WorkerSpec("w"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s")
    backlog = Backlog()
    link.client = backlog  # type: ignore[assignment]

    async def connected(_: WorkerLink) -> None:
        pass

    relay = Relay(link, None, None, None, connected)  # type: ignore[arg-type]
    session = asyncio.create_task(relay._session())
    seen: list[int] = []
    while not session.done():
        seen.append(backlog.read)
        await asyncio.sleep(0)
    await session
    assert backlog.read == FRAMES
    during = [read for read in seen if 0 < read < FRAMES]
    assert len(during) >= 10, seen  # a turn every few frames, not one after the last


class SlowWorker(FakeSocket):
    """A worker whose event socket the test feeds (`send`, `close`) and whose `/history`
    answers only once `answer` is set (and then fails: the lease sweep would ask again)."""

    def __init__(self) -> None:
        self.wire: asyncio.Queue[Frame | None] = asyncio.Queue()
        self.answer = asyncio.Event()

    async def _frames(self) -> AsyncIterator[Frame]:
        while (frame := await self.wire.get()) is not None:
            yield frame

    async def send(self, kind: str, prompt_id: str, **data: Any) -> None:
        """A frame on the wire, then what the gateway's other tasks do with it meanwhile."""
        self.wire.put_nowait({"type": kind, "data": {"prompt_id": prompt_id, **data}})
        for _ in range(20):
            await asyncio.sleep(0)

    async def history(self, prompt_id: str) -> None:
        await self.answer.wait()
        raise WorkerUnreachable(f"no history of {prompt_id} for now")


async def test_a_prefetched_prompt_is_timed_as_its_frames_arrive_not_when_they_are_handled(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    now = FakeClock(100.0)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    handle = WorkerHandle(WorkerSpec("w"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s")
    worker = SlowWorker()
    link.client = worker  # type: ignore[assignment]
    link.hold("a", Held(1, None, "a.safetensors", ("a.safetensors",), record=record("a"), sid="s"))
    link.hold("b", Held(1, None, "a.safetensors", ("a.safetensors",), record=record("b"), sid="s"))

    async def connected(_: WorkerLink) -> None:
        pass

    relay = Relay(link, store, hub, None, connected, clock=now)  # type: ignore[arg-type]
    session = asyncio.create_task(relay._session())
    await worker.send("execution_start", "a")
    await worker.send("executing", "a", node="5")
    await worker.send("executing", "a", node=None)  # the relay now fetches a's history...
    await worker.send("execution_start", "b")  # ...while b, prefetched, runs at once
    await worker.send("executing", "b", node="5")
    for step in (1, 2, 3):
        now.advance(1.0)
        await worker.send("progress", "b", node="5", value=step, max=3)
    worker.answer.set()
    worker.wire.put_nowait(None)
    await session
    clock = link.held["b"].clock
    assert clock is not None
    steps = clock.steps["5"]
    # Handled only once the history came, the three steps would all read the same instant.
    assert (steps.first_s, steps.last_s) == (101.0, 103.0)
    assert link.last_progress_s == 103.0
    await asyncio.gather(*relay._writes)
