"""demand: recent arrival rates per model."""

from __future__ import annotations

import pytest

from gateway.learning.demand import DemandMeter, observe, rates_at


def test_a_steady_stream_converges_to_its_rate() -> None:
    meter = DemandMeter(half_life_s=30.0)
    for i in range(2000):
        meter = observe(meter, ["m"], i * 0.5)
    assert rates_at(meter, 999.5)["m"] == pytest.approx(2.0, rel=0.05)


def test_the_rate_halves_after_a_half_life_of_silence() -> None:
    meter = observe(DemandMeter(half_life_s=10.0), ["m"], 0.0)
    assert rates_at(meter, 10.0)["m"] == pytest.approx(rates_at(meter, 0.0)["m"] / 2)
