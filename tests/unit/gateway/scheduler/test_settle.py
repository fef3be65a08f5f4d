"""When the dispatcher asks the policy after jobs arrive (`gateway.scheduler.settle`)."""

from __future__ import annotations

import pytest

from gateway.scheduler.settle import SETTLE_CAP_S, SETTLE_S, Settling, arrived


@pytest.mark.parametrize(
    ("arrivals_s", "until_s"),
    [
        ([5.0], 5.0 + SETTLE_S),  # a lone job: the pause after it
        ([5.0, 5.01, 5.02], 5.02 + SETTLE_S),  # a burst: the pause after its last job
        ([5.0, 5.015, 5.03, 5.045, 5.06, 5.075, 5.09], 5.0 + SETTLE_CAP_S),  # a stream: the cap
        ([5.0, 5.03, 4.99], 5.03 + SETTLE_S),  # a stamp out of order moves nothing back
    ],
)
def test_the_policy_is_asked_once_arrivals_pause_or_at_the_cap(
    arrivals_s: list[float], until_s: float
) -> None:
    settling: Settling | None = None
    for at_s in arrivals_s:
        settling = arrived(settling, at_s)
    assert settling is not None
    assert settling.until_s() == pytest.approx(until_s)
    assert settling.until_s() <= arrivals_s[0] + SETTLE_CAP_S


def test_no_pause_asks_at_once() -> None:
    assert arrived(None, 3.0).until_s(gap_s=0.0) == 3.0
