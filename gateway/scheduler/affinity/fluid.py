"""When several workers, each free from its own time, finish one queue of work together.

Water-filling in the fluid limit: worker i, free at `a_i`, would need `d_i` seconds for the
whole queue alone; together they finish at the T where `sum((T - a_i) / d_i) = 1` over the
workers free before T. Exact for one job on one worker, optimistic by at most one job's run
when jobs cannot be split.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def finish_s(servers: Iterable[tuple[float, float]]) -> float:
    """When `servers` ((free at, seconds for the whole queue alone) pairs) finish the queue
    together; inf when there are none."""
    rate = 0.0
    weighted = 0.0
    best = math.inf
    for free_at_s, alone_s in sorted(servers):
        if free_at_s >= best:
            break
        rate += 1.0 / alone_s
        weighted += free_at_s / alone_s
        best = (1.0 + weighted) / rate
    return best


def share(free_at_s: float, alone_s: float, others: Iterable[tuple[float, float]]) -> float:
    """The fraction of the queue a worker free at `free_at_s` (`alone_s` for all of it) does
    when it joins `others`: 0 if they finish before it could start."""
    together = finish_s([*others, (free_at_s, alone_s)])
    return min(max((together - free_at_s) / alone_s, 0.0), 1.0)
