"""gateway.scheduler.timescale: a snapshot seen in emulated seconds keeps the whole queue."""

from __future__ import annotations

import pytest

from gateway.scheduler.queue import group_jobs, snapshot_of
from gateway.scheduler.snapshot import JobView, WorkerView
from gateway.scheduler.timescale import emulated


def test_the_queue_groups_are_scaled_with_the_rest() -> None:
    jobs = [JobView(f"j{i}", 10.0 + i, model_keys=frozenset({"m"}), score=i) for i in range(5)]
    groups = group_jobs(jobs, head=2)
    seen = emulated(snapshot_of(20.0, groups, (WorkerView("w"),), {}), 10.0)
    (group,) = seen.groups
    assert group.count == 5
    assert group.enqueued_s_sum == pytest.approx(10.0 * sum(j.enqueued_at_s for j in jobs))
    assert group.oldest_s == pytest.approx(100.0)
    assert group.newest_s == pytest.approx(140.0)  # the last of all five, beyond the head
    assert [j.enqueued_at_s for j in group.head] == pytest.approx([100.0, 110.0])
    assert group.waited_s(seen.now_s) == pytest.approx(10.0 * groups[0].waited_s(20.0))
