"""Emulated durations add up to their sum: the sleeps' overshoot, late wake-ups on a busy
machine and the host's own work between sleeps are paid back; an idle gap or a hang is not."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.workers.emulator.conftest import Factory, run_to_history
from tests.unit.workers.emulator.running import txt2img
from workers.emulator.execution.engine import Pacer, format_duration


class SlowClock:
    """A clock whose timed sleeps overshoot by `late_s` (a bare yield, sleep(0), does not)."""

    def __init__(self, late_s: float) -> None:
        self.now = 0.0
        self.late_s = late_s

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds + (self.late_s if seconds > 0 else 0.0)
        await asyncio.sleep(0)  # the emulator's other tasks (requests, sockets) run meanwhile


async def test_overshoot_is_paid_back_by_the_next_sleeps() -> None:
    clock = SlowClock(late_s=0.001)
    pacer = Pacer(clock.sleep, clock)
    for _ in range(100):
        await pacer.spend(0.0002)  # each sleep alone would take 6x as long
    assert clock.now == pytest.approx(0.02, abs=0.002)


async def test_wake_ups_made_late_by_a_busy_machine_are_paid_back() -> None:
    # 80 ms late each time: once the emulator forgave any lag over 50 ms, so a 20-step job
    # took 2.6 s instead of 1 s when the machine was busy.
    clock = SlowClock(late_s=0.08)
    pacer = Pacer(clock.sleep, clock)
    for _ in range(20):
        await pacer.spend(0.05)
    assert clock.now == pytest.approx(1.0, abs=0.081)


@pytest.mark.parametrize("host_s", [0.01, 0.2, 0.6])
async def test_the_hosts_work_between_sleeps_is_paid_back(host_s: float) -> None:
    clock = SlowClock(late_s=0.0)
    pacer = Pacer(clock.sleep, clock)
    await pacer.spend(0.5)
    clock.now += host_s  # writing a PNG, answering a request
    await pacer.spend(0.5)
    await pacer.spend(0.5)
    assert clock.now == pytest.approx(max(1.5, 0.5 + host_s))


async def test_an_idle_gap_is_not_banked() -> None:
    clock = SlowClock(late_s=0.0)
    pacer = Pacer(clock.sleep, clock)
    await pacer.spend(0.01)
    clock.now += 5.0  # idle between prompts
    pacer.restart()
    await pacer.spend(0.5)
    assert clock.now == pytest.approx(5.51)


async def emulated_s(make_app: Factory, clock: SlowClock, faults: dict[str, float]) -> float:
    """Seconds on `clock` that one 20-step prompt takes on a fresh emulator (time scale 1)."""
    client, emulator = await make_app(sleep=clock.sleep, clock=clock, time_scale=1.0)
    emulator.faults.update(faults)
    before = clock.now
    await run_to_history(client, {"prompt": txt2img(steps=20)})
    return clock.now - before


async def test_a_busy_machine_does_not_slow_the_emulated_card(make_app: Factory) -> None:
    exact = await emulated_s(make_app, SlowClock(late_s=0.0), {})
    busy = await emulated_s(make_app, SlowClock(late_s=0.08), {})
    assert exact < busy <= exact + 0.08  # only the last sleep's lateness shows


async def test_a_hang_adds_its_seconds(make_app: Factory) -> None:
    exact = await emulated_s(make_app, SlowClock(late_s=0.0), {})
    hung = await emulated_s(make_app, SlowClock(late_s=0.0), {"hang_s": 5, "hang_at_step": 2})
    assert hung == pytest.approx(exact + 5)


@pytest.mark.parametrize(
    ("seconds", "text"), [(1.304, "1.30 seconds"), (0.0, "0.00 seconds"), (601.0, "00:10:01")]
)
def test_durations_are_logged_as_comfyui_does(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
