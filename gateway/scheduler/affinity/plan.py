"""While a backlog lasts, which families each worker serves first: comparative advantage.

A farm of unlike cards finishes a long backlog soonest when each card runs the work it is
relatively best at: an RTX 4070 Ti runs SD1.5 at 1.4x an H200's time and SDXL at 2x, so with
both waiting the H200 takes the SDXL and the 4070 Ti the SD1.5, whatever either holds now.
Greedy choices cannot see that (the slow card serves the SDXL model it holds because it holds
it; `bench/results/scorecard.md`, the batch cells on mixed farms).

The split is the fluid relaxation of the backlog's makespan (jobs divisible, loads and the
workers' free times left out): maximise the rate `theta` at which every family's backlog is
served, each worker spending at most all its time,

    maximise theta  s.t.  sum_f t[w][f] z[w][f] <= 1 (each worker w),
                          theta <= sum_w z[w][f]   (each family f),

where `t[w][f]` is worker w's seconds for family f's whole backlog and `z[w][f]` the share of
it w serves per second. Its dual prices a second of each family's backlog (`p[f]`); a worker's
efficiency on a family is `p[f] / t[w][f]`. What is guaranteed (tests in
tests/unit/gateway/scheduler/test_plan.py):

- By complementary slackness a worker works, in every optimal split, only on the families
  where its efficiency is the highest: so a worker restricted to the families within
  `Tuning.tie_share` of its best efficiency can still take its part of an optimal split, and
  the farm's fluid makespan is unchanged by the plan (`Plan.makespan_s`).
- On a farm of like cards every family is equally efficient on every worker: no worker is
  restricted.
- The plan only orders a worker's choices (`Plan.allows`, then everything else): a worker
  that would have taken a job takes one (work conservation holds as it did).
- It applies only to a backlog the farm needs at least `Tuning.plan_s` seconds for, where the
  loads it causes are small beside the work; below that the greedy rules decide alone.

Jobs pinned to some workers (validation, an A/B group) and workers of a reserved group are
left out of the split and never restricted. Workers of like speeds (within 2 %) are solved as
one class, so the program has classes x families variables, whatever the farm's size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gateway.scheduler.affinity.lanes import Lane
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.cost import group_admits

_CLASS_STEP = math.log(1.02)
"""Workers whose seconds for every family round to the same 2 % step are one class."""
_MAX_CLASSES = 32
"""More classes than this (speeds spread over many steps) are merged at coarser steps."""
_EPS = 1e-12


@dataclass(frozen=True)
class Plan:
    families: Mapping[str, frozenset[str]]
    """Lane -> the families it serves first (only lanes with a restriction are listed)."""
    planned: frozenset[str]
    """The families the split covers."""
    makespan_s: float
    """The fluid makespan of the backlog (1 / theta)."""

    def restricts(self, lane: str) -> bool:
        return lane in self.families

    def allows(self, lane: str, queue: Queue) -> bool:
        """Whether the queue is among the lane's first choices."""
        served = self.families.get(lane)
        if served is None:
            return True
        job = queue.first
        if job.family not in self.planned or _pinned(queue):
            return True
        return job.family in served


def plan_of(farm: Farm, queues: Sequence[Queue], plan_s: float, tie_share: float) -> Plan | None:
    """The split of the waiting backlog, or None where it would restrict no worker."""
    backlog: dict[str, tuple[int, float]] = {}
    for queue in queues:
        if queue.has_jobs and not _pinned(queue):
            count, work_units = backlog.get(queue.first.family, (0, 0.0))
            backlog[queue.first.family] = (count + queue.count, work_units + queue.work_units)
    lanes = [lane for lane in farm.lanes.values() if group_admits(lane.worker.group, None)]
    if len(backlog) < 2 or len(lanes) < 2:
        return None
    families = sorted(backlog)
    seconds = {lane.name: _seconds(farm, lane, families, backlog) for lane in lanes}
    if _one_after_another_s(seconds.values(), len(families)) < plan_s:
        return None  # a schedule at least as slow as the optimum already beats the threshold
    classes = _classes(seconds)
    theta, prices = _solve([t for t, _ in classes], [len(names) for _, names in classes])
    if theta <= 0.0 or 1.0 / theta < plan_s:
        return None
    served: dict[str, frozenset[str]] = {}
    for times, names in classes:
        first = _most_efficient(times, prices, families, tie_share)
        if len(first) < len(families):
            served.update(dict.fromkeys(names, first))
    if not served:
        return None
    return Plan(served, frozenset(families), 1.0 / theta)


def _most_efficient(
    times: Sequence[float], prices: Sequence[float], families: Sequence[str], tie_share: float
) -> frozenset[str]:
    """The families on which a class's efficiency (price over its seconds) is within
    `tie_share` of its highest: the only ones it works on in an optimal split."""
    efficiency = [price / t for price, t in zip(prices, times, strict=True)]
    top = max(efficiency)
    return frozenset(
        f for f, e in zip(families, efficiency, strict=True) if e >= (1 - tie_share) * top
    )


def _pinned(queue: Queue) -> bool:
    job = queue.first
    return job.eligible is not None or job.group is not None


def _seconds(
    farm: Farm, lane: Lane, families: Sequence[str], totals: Mapping[str, tuple[int, float]]
) -> list[float]:
    """The lane's warm seconds for each family's whole backlog (its jobs, its work units)."""
    out = []
    for family in families:
        speed, fixed_s = farm.rate(lane, family)
        count, work_units = totals[family]
        out.append(count * fixed_s + work_units / speed)
    return out


def _one_after_another_s(seconds: Iterable[list[float]], families: int) -> float:
    """The makespan when every worker serves each family in turn, together: a feasible
    split, so never shorter than the optimum."""
    rates = [0.0] * families
    for times in seconds:
        for f, t in enumerate(times):
            rates[f] += 1.0 / max(t, _EPS)
    return sum(1.0 / rate for rate in rates)


def _classes(seconds: Mapping[str, list[float]]) -> list[tuple[list[float], list[str]]]:
    """Lanes grouped by their seconds per family in steps of 2 % (coarser while there are
    more than `_MAX_CLASSES`); each class's seconds are its members' mean."""
    step = _CLASS_STEP
    while True:
        groups: dict[tuple[int, ...], list[str]] = {}
        for name, times in seconds.items():
            key = tuple(round(math.log(max(t, _EPS)) / step) for t in times)
            groups.setdefault(key, []).append(name)
        if len(groups) <= _MAX_CLASSES:
            break
        step *= 2.0
    out = []
    for names in groups.values():
        count = len(names)
        mean = [sum(seconds[n][f] for n in names) / count for f in range(len(seconds[names[0]]))]
        out.append((mean, names))
    return out


def _solve(times: Sequence[Sequence[float]], sizes: Sequence[int]) -> tuple[float, list[float]]:
    """theta and the families' dual prices of the split's program (a class of `sizes[c]`
    workers, each needing `times[c][f]` seconds for family f's backlog), by the simplex
    method with Bland's rule on a dense tableau (`_tableau`)."""
    classes, families = len(times), len(times[0])
    rows, objective = _tableau(times, sizes)
    n = classes * families + 1
    basis = list(range(n, n + len(rows)))
    while (
        col := next((j for j in range(len(basis) + n) if objective[j] < -1e-9), None)
    ) is not None:
        candidates = [
            (row[-1] / row[col], basis[r], r) for r, row in enumerate(rows) if row[col] > 1e-9
        ]
        pivot_row = min(candidates)[2]  # never empty: every worker's time is bounded
        _pivot([*rows, objective], rows[pivot_row], col)
        basis[pivot_row] = col
    return objective[-1], [objective[n + classes + f] for f in range(families)]


def _tableau(
    times: Sequence[Sequence[float]], sizes: Sequence[int]
) -> tuple[list[list[float]], list[float]]:
    """The rows (the classes' time, then the families' rate) over the variables z[c][f],
    theta, one slack per row and the right-hand side; and the objective row."""
    classes, families = len(times), len(times[0])
    n = classes * families + 1
    width = n + classes + families + 1
    rows: list[list[float]] = []
    for c in range(classes):
        row = [0.0] * width
        row[c * families : (c + 1) * families] = times[c]
        row[n + c] = 1.0
        row[-1] = float(sizes[c])
        rows.append(row)
    for f in range(families):
        row = [0.0] * width
        for c in range(classes):
            row[c * families + f] = -1.0
        row[n - 1] = 1.0
        row[n + classes + f] = 1.0
        rows.append(row)
    objective = [0.0] * width
    objective[n - 1] = -1.0
    return rows, objective


def _pivot(rows: Sequence[list[float]], pivot: list[float], col: int) -> None:
    scale = pivot[col]
    for j in range(len(pivot)):
        pivot[j] /= scale
    for row in rows:
        if row is not pivot and abs(row[col]) > 1e-12:
            factor = row[col]
            for j in range(len(row)):
                row[j] -= factor * pivot[j]
