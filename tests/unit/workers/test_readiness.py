"""Readiness polling: yes ends it, a gone process ends it at once, the deadline ends it."""

from __future__ import annotations

import asyncio

import pytest

from workers.readiness import NotReady, Pacing, await_until, wait_until


class FakeTime:
    """A clock that moves only when the poller sleeps."""

    def __init__(self) -> None:
        self.now_s = 100.0
        self.sleeps_s: list[float] = []

    def clock(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.sleeps_s.append(seconds)
        self.now_s += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def test_the_answer_ends_the_wait_and_the_seconds_it_took_come_back() -> None:
    t = FakeTime()
    calls: list[int] = []

    def ready() -> bool:
        calls.append(1)
        return len(calls) == 3

    took_s = wait_until(ready, 10, pacing=Pacing(0.5, 1.0, 0.5), clock=t.clock, sleep=t.sleep)
    assert took_s == 1.0
    assert t.sleeps_s == [0.5, 0.5]


def test_the_deadline_ends_the_wait_with_not_ready() -> None:
    t = FakeTime()
    with pytest.raises(NotReady, match=r"not ready after 2 s") as raised:
        wait_until(lambda: False, 2, pacing=Pacing(0.5, 1.0, 0.5), clock=t.clock, sleep=t.sleep)
    assert not raised.value.exited
    assert t.now_s == 102.0


def test_a_gone_process_ends_the_wait_at_once_with_its_reason() -> None:
    t = FakeTime()
    with pytest.raises(NotReady, match="exited with 3") as raised:
        wait_until(lambda: False, 60, gone=lambda: "exited with 3", clock=t.clock, sleep=t.sleep)
    assert raised.value.exited
    assert t.sleeps_s == []


def test_pacing_grows_up_to_its_cap() -> None:
    t = FakeTime()
    pacing = Pacing(first_s=0.02, growth=2.0, max_s=0.1)
    with pytest.raises(NotReady):
        wait_until(lambda: False, 0.3, pacing=pacing, clock=t.clock, sleep=t.sleep)
    assert t.sleeps_s[:4] == [0.02, 0.04, 0.08, 0.1]


def test_the_async_wait_asks_an_async_probe_on_the_injected_clock() -> None:
    t = FakeTime()
    calls: list[int] = []

    async def ready() -> bool:
        calls.append(1)
        return len(calls) == 2

    took_s = asyncio.run(
        await_until(ready, 5, pacing=Pacing(0.25, 1.0, 0.25), clock=t.clock, sleep=t.asleep)
    )
    assert took_s == 0.25
    with pytest.raises(NotReady) as raised:
        asyncio.run(await_until(ready, 5, gone=lambda: "gone", clock=t.clock, sleep=t.asleep))
    assert raised.value.reason == "gone"
