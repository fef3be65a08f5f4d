"""The relay of a worker's events: a backlog of frames leaves the event loop to the others."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from gateway.dispatch.links import WorkerLink
from gateway.dispatch.relay import Relay
from workers.client import ComfyClient, Frame
from workers.supervision.launch import WorkerHandle, WorkerSpec

FRAMES = 500


class Backlog:
    """An event socket with `FRAMES` frames already read: each comes without a suspension,
    after 0.2 ms of parsing."""

    def __init__(self) -> None:
        self.read = 0

    @contextlib.asynccontextmanager
    async def events(
        self, client_id: str, feature_flags: Mapping[str, Any] | None = None
    ) -> AsyncIterator[AsyncIterator[Frame]]:
        yield self._frames()

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
