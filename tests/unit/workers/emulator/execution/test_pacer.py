"""Many tiny emulated durations add up to their sum, not to the sleeps' overshoot."""

from __future__ import annotations

import pytest

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


async def test_overshoot_is_paid_back_by_the_next_sleeps() -> None:
    clock = SlowClock(late_s=0.001)
    pacer = Pacer(clock.sleep, clock)
    for _ in range(100):
        await pacer.spend(0.0002)  # each sleep alone would take 6x as long
    assert clock.now == pytest.approx(0.02, abs=0.002)


async def test_an_idle_gap_is_not_banked() -> None:
    clock = SlowClock(late_s=0.0)
    pacer = Pacer(clock.sleep, clock)
    await pacer.spend(0.01)
    clock.now += 5.0  # idle between prompts
    await pacer.spend(0.5)
    assert clock.now == pytest.approx(5.51)


@pytest.mark.parametrize(
    ("seconds", "text"), [(1.304, "1.30 seconds"), (0.0, "0.00 seconds"), (601.0, "00:10:01")]
)
def test_durations_are_logged_as_comfyui_does(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
