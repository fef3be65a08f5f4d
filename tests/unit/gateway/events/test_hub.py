"""Status broadcasts and broadcast frames of the hub, without Redis (no peers to publish to)."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from gateway.events.frames import BROADCAST, ClientFrame
from gateway.events.hub import ClientSocket, Hub


class Counter:
    """The farm's queue length as the store would report it."""

    def __init__(self) -> None:
        self.remaining = 0

    async def __call__(self) -> int:
        return self.remaining


@pytest.fixture
def counter() -> Counter:
    return Counter()


@pytest.fixture
def hub(counter: Counter) -> Hub:
    hub = Hub(aioredis.Redis(), "events", counter)
    hub.peers = False
    return hub


def drained(socket: ClientSocket) -> list[str | bytes | None]:
    items = []
    while not socket.queue.empty():
        items.append(socket.queue.get_nowait())
    return items


def statuses(socket: ClientSocket) -> list[int]:
    texts = [json.loads(item) for item in drained(socket) if isinstance(item, str)]
    return [t["data"]["status"]["exec_info"]["queue_remaining"] for t in texts]


async def test_a_prompt_announces_its_queue_as_comfyui_does(hub: Hub, counter: Counter) -> None:
    socket = ClientSocket("watcher")
    hub.attach(socket)
    counter.remaining = 1
    await hub.announce_queue()  # accepted
    await hub.announce_queue(always=True)  # started: the same length, sent again
    await hub.announce_queue()  # nothing changed: nothing sent
    counter.remaining = 0
    await hub.announce_queue()  # finished
    assert statuses(socket) == [1, 1, 0]


async def test_nothing_is_read_while_no_one_listens(hub: Hub, counter: Counter) -> None:
    counter.remaining = 3
    await hub.announce_queue(always=True)
    assert hub.last_queue_remaining == 0


def test_a_broadcast_frame_reaches_every_socket_and_a_client_frame_only_its_own(hub: Hub) -> None:
    mine, other = ClientSocket("mine"), ClientSocket("other")
    hub.attach(mine)
    hub.attach(other)
    hub.publish(ClientFrame(BROADCAST, text="progress"))
    hub.publish(ClientFrame("mine", text="executing"))
    assert drained(mine) == ["progress", "executing"]
    assert drained(other) == ["progress"]
