"""Background tasks: a stop that ends even tasks that lose a cancel, loops that outlive bugs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest
import redis.asyncio as aioredis

from gateway import tasks


async def test_a_redis_loop_ends_whatever_the_moment_of_its_cancel(redis_url: str) -> None:
    # redis-py sends through asyncio.wait_for once socket_timeout is set; on Python 3.11 that
    # loses a cancel arriving as the send completes, a few loop turns into a command.
    client = aioredis.from_url(redis_url, socket_timeout=10)

    async def poll() -> None:
        while True:
            tasks.check_cancelled()
            await client.zrangebyscore("leases", 0, 1, 0, 100)

    try:
        for turns in [*range(16), *range(16)]:
            task = asyncio.create_task(poll())
            for _ in range(turns):
                await asyncio.sleep(0)
            await tasks.stop([task], grace_s=5)
            assert task.done(), f"a Redis loop cancelled after {turns} turns kept running"
    finally:
        await client.aclose()


async def test_stop_cancels_again_a_task_that_swallowed_its_cancel() -> None:
    async def swallows_once() -> None:
        # As asyncio.wait_for does on Python 3.11 when the awaited thing has just finished;
        # then it waits for a frame that never comes.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)
        await asyncio.Event().wait()

    task = asyncio.create_task(swallows_once())
    await asyncio.sleep(0)
    await tasks.stop([task], grace_s=5, again_s=0.05)
    assert task.cancelled()


async def test_stop_gives_up_loudly_on_a_task_that_refuses_to_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    released = asyncio.Event()

    async def stubborn() -> None:
        while not released.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    started_s = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="gateway.tasks"):
        await tasks.stop([task], grace_s=0.3, again_s=0.05)
    assert time.monotonic() - started_s < 2
    assert "task stubborn did not stop within 0.3s" in caplog.text
    released.set()
    await task


async def test_stop_reports_a_task_that_had_failed(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(broken(), name="broken")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="gateway.tasks"):
        await tasks.stop([task])
    assert "task broken had failed" in caplog.text
    assert "boom" in caplog.text


async def test_a_background_loop_is_restarted_after_it_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    third = asyncio.Event()

    async def body() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 3:
            third.set()
            await asyncio.sleep(30)
        raise ValueError("a bug in one round")

    with caplog.at_level(logging.ERROR, logger="gateway.tasks"):
        task = tasks.spawn("flaky", body, retry_s=0)
        async with asyncio.timeout(5):
            await third.wait()
        await tasks.stop([task])
    assert rounds == [0, 1, 2]
    assert caplog.text.count("flaky failed; restarting") == 2


async def test_a_draining_loop_lets_the_others_run_once_per_slice() -> None:
    now = [0.0]
    turns = tasks.Turns(slice_s=0.001, clock=lambda: now[0])
    queue: asyncio.Queue[int] = asyncio.Queue()
    for item in range(10):
        queue.put_nowait(item)
    drained: list[int] = []
    seen: list[int] = []

    async def drain() -> None:
        while not queue.empty():
            drained.append(await queue.get())  # never suspends: the items are there
            now[0] += 0.0004
            await turns.take()

    async def other() -> None:
        seen.append(len(drained))

    # The drainer starts first; the other task waits for its turn.
    await asyncio.gather(asyncio.create_task(drain()), asyncio.create_task(other()))
    assert seen == [3]  # let in after 1.2 ms of work, not after all ten items
