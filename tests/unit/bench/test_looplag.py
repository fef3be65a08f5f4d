"""`bench.looplag` times a decision the way the dispatcher makes it."""

from __future__ import annotations

import asyncio

from bench.decision.snapshots import Size, build_snapshot
from bench.looplag import longest_gap_s, longest_step_s


def test_a_decision_is_timed_in_steps_and_with_the_loop_ticking() -> None:
    snapshot = build_snapshot("burst", Size(200, 16, 16))
    assert longest_step_s(snapshot) > 0.0
    decision_s, gap_s = asyncio.run(longest_gap_s(snapshot, 0.0))
    assert decision_s > 0.0 and gap_s >= 0.0
