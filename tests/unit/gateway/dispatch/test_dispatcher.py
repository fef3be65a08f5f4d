"""The dispatcher's loop: woken or idle, a cancel always ends it (the gateway's stop awaits it)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from gateway.app import load_policy
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.links import Links, WorkerLink, WorkerState
from gateway.events.hub import Hub
from gateway.jobs.store import JobStore
from tests.unit.gateway.jobs.test_store import new_job
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec


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


class SuspectGuard:
    """Redis may have restarted: a guard that has not repaired it yet."""

    def __init__(self) -> None:
        self.suspected = True

    async def ready(self) -> bool:
        return True

    def suspect(self) -> None:
        self.suspected = True


async def test_no_job_is_claimed_while_a_redis_restart_is_suspected(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    handle = WorkerHandle(WorkerSpec("w1"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s", state=WorkerState.READY)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    dispatcher = Dispatcher(store, Links([link]), load_policy("sticky"), hub)
    guard = SuspectGuard()
    dispatcher.guard = guard
    job = new_job()
    await store.enqueue(job)
    try:
        assert await dispatcher.dispatch_once() == 0
        assert await store.pending_ids() == [job.job_id]
        guard.suspected = False
        assert await dispatcher.dispatch_once() == 1
    finally:
        await dispatcher.stop()
        await link.client.aclose()
