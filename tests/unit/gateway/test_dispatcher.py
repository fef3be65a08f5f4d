"""The dispatcher's loop: woken or idle, a cancel always ends it (the gateway's stop awaits it)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from gateway.app import load_policy
from gateway.dispatcher import Dispatcher
from gateway.hub import Hub
from gateway.jobs import JobStore
from gateway.links import Links


@pytest.mark.parametrize("turns", range(6))
async def test_a_dispatcher_woken_just_before_it_is_cancelled_still_ends(
    store: JobStore, redis_client: aioredis.Redis, turns: int
) -> None:
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    dispatcher = Dispatcher(store, Links([]), load_policy("sticky"), hub, poll_s=30)
    task = asyncio.create_task(dispatcher.run())
    await asyncio.sleep(0)
    dispatcher.wake()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done, f"cancelled {turns} turns after a wake-up, the dispatcher kept running"
