"""What this node accepted in the last seconds, kept in memory in case Redis loses it.

Redis syncs its AOF every second: a crash can lose a job it acknowledged, whose client holds
the prompt_id already. The journal outlives that window (`window_s`, longer than the fsync
interval) so that `gateway.recovery.redis_repair` can enqueue such a job again, same id, same
number.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.jobs.models import NewJob


@dataclass(frozen=True)
class Accepted:
    """A job as it was enqueued: `job.number` is the number it got."""

    job: NewJob
    enqueued_at_ms: int
    counted: bool
    """Its number came from the farm-wide counter (the request gave none)."""
    idempotency: tuple[str, str] | None = None
    at_s: float = 0.0

    @property
    def counter_floor(self) -> int:
        """The counter value that the INCR which numbered it left behind (see ENQUEUE)."""
        return int(abs(self.job.number or 0)) + 1 if self.counted else 0


class Journal:
    """The last `window_s` seconds of accepted jobs, at most `max_items` of them, oldest first;
    a job that ended on this node is dropped (it must not run again)."""

    def __init__(
        self,
        window_s: float = 10.0,
        max_items: int = 10000,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.window_s = window_s
        self.max_items = max_items
        self.clock = clock
        self._items: OrderedDict[str, Accepted] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def record(self, accepted: Accepted) -> None:
        now_s = self.clock()
        self._items[accepted.job.job_id] = _at(accepted, now_s)
        self._items.move_to_end(accepted.job.job_id)
        self._prune(now_s)

    def discard(self, job_id: str) -> None:
        self._items.pop(job_id, None)

    def recent(self) -> list[Accepted]:
        """What was accepted in the last `window_s` seconds, oldest first."""
        self._prune(self.clock())
        return list(self._items.values())

    def _prune(self, now_s: float) -> None:
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)
        while self._items and next(iter(self._items.values())).at_s < now_s - self.window_s:
            self._items.popitem(last=False)


def _at(accepted: Accepted, now_s: float) -> Accepted:
    return Accepted(
        accepted.job, accepted.enqueued_at_ms, accepted.counted, accepted.idempotency, now_s
    )
