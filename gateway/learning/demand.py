"""Recent arrival rate per model key: an exponentially weighted rate, updated per arrival.

Pure: `observe` returns a new meter. The dispatcher (or the simulator) keeps one meter and puts
`rates_at(meter, now)` into the snapshot's `demand_per_s`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DemandMeter:
    half_life_s: float = 60.0
    rates: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Model key -> (rate in jobs per second at time t, t)."""

    @property
    def tau_s(self) -> float:
        return self.half_life_s / math.log(2.0)


def _decayed(meter: DemandMeter, key: str, at_s: float) -> float:
    rate, since_s = meter.rates.get(key, (0.0, at_s))
    return rate * math.exp(-max(at_s - since_s, 0.0) / meter.tau_s)


def observe(meter: DemandMeter, keys: Iterable[str], at_s: float) -> DemandMeter:
    """The meter after one job using `keys` arrived at `at_s`."""
    rates = dict(meter.rates)
    for key in keys:
        rates[key] = (_decayed(meter, key, at_s) + 1.0 / meter.tau_s, at_s)
    return DemandMeter(meter.half_life_s, rates)


def rates_at(meter: DemandMeter, now_s: float) -> dict[str, float]:
    """Jobs per second per model key, as of `now_s`."""
    return {key: _decayed(meter, key, now_s) for key in meter.rates}
