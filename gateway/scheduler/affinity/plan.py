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
- It applies to a backlog the farm needs at least `Tuning.plan_s` seconds for, where the
  loads it causes are small beside the work, and to any backlog once arrivals have stopped
  (`settled`: a batch sent at once), where its one assumption, that nothing more arrives,
  holds. Otherwise the greedy rules decide alone.

Jobs pinned to some workers (validation, an A/B group) and workers of a reserved group are
left out of the split and never restricted. Workers of like speeds (within 2 %) are solved as
one class, so the program has classes x families variables, whatever the farm's size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tuning import Tuning
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
    workers: frozenset[str]
    """The workers the split covers (none of a reserved group)."""

    def restricts(self, lane: str) -> bool:
        return lane in self.families

    def allows(self, lane: str, queue: Queue) -> bool:
        """Whether the queue is among the lane's first choices."""
        served = self.families.get(lane)
        if served is None:
            return True
        job = queue.first
        if job.family not in self.planned or _pinned(queue, self.workers):
            return True
        return job.family in served


def first_choices(plan: Plan | None, lane: str) -> tuple[str, ...]:
    """The families the plan gives the lane first, sorted; empty where it restricts none."""
    if plan is None:
        return ()
    return tuple(sorted(plan.families.get(lane, ())))


def plan_of(farm: Farm, queues: Sequence[Queue], tuning: Tuning, stopped: bool) -> Plan | None:
    """The split of the waiting backlog, or None where it would restrict no worker, or where
    the backlog is short (under `Tuning.plan_s`) and jobs still arrive (`stopped`: whether
    arrivals have stopped, `settled`)."""
    workers = frozenset(
        lane.name for lane in farm.lanes.values() if group_admits(lane.worker.group, None)
    )
    backlog: dict[str, tuple[int, float]] = {}
    for queue in queues:
        if queue.has_jobs and not _pinned(queue, workers):
            count, work_units = backlog.get(queue.first.family, (0, 0.0))
            backlog[queue.first.family] = (count + queue.count, work_units + queue.work_units)
    if len(backlog) < 2:
        return None
    families = sorted(backlog)
    classes = _classes(farm, families, backlog)
    if sum(len(names) for _, names in classes) < 2:
        return None
    plan_s = 0.0 if stopped else tuning.plan_s
    if _one_after_another_s(classes) < plan_s:
        return None  # a schedule at least as slow as the optimum already beats the threshold
    theta, prices = _solve([t for t, _ in classes], [len(names) for _, names in classes])
    if theta <= 0.0 or 1.0 / theta < plan_s:
        return None
    served: dict[str, frozenset[str]] = {}
    for times, names in classes:
        first = _most_efficient(times, prices, families, tuning.tie_share)
        if len(first) < len(families):
            served.update(dict.fromkeys(names, first))
    if not served:
        return None
    return Plan(served, frozenset(families), 1.0 / theta, workers)


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


def settled(now_s: float, queues: Sequence[Queue], quiet_gaps: float) -> bool:
    """Whether arrivals have stopped: nothing has arrived, since the newest waiting job, for
    `quiet_gaps` times the mean gap between the waiting jobs' arrivals. A batch sent at once
    is settled from the start; a stream of arrivals is not, while it lasts."""
    count = 0
    oldest_s, newest_s = math.inf, -math.inf
    for queue in queues:
        if queue.has_jobs:
            count += queue.count
            oldest_s = min(oldest_s, queue.first.enqueued_at_s)
            newest_s = max(newest_s, queue.newest_s)
    if count < 2 or math.isinf(quiet_gaps):
        return False
    gap_s = max(newest_s - oldest_s, 0.0) / (count - 1)
    return now_s - newest_s >= quiet_gaps * gap_s


def _pinned(queue: Queue, workers: frozenset[str]) -> bool:
    """Whether the queue's jobs may run on only some of the split's workers (an A/B group, or
    validation left some out): they are left out of the split, and never restricted. A job
    every worker may run is not pinned: the gateway's validation marks each job with the
    workers whose catalogue has its files, every worker as a rule."""
    job = queue.first
    return job.group is not None or (job.eligible is not None and not workers <= job.eligible)


def _one_after_another_s(classes: Sequence[tuple[list[float], list[str]]]) -> float:
    """The makespan when every worker serves each family in turn, together: a feasible
    split, so never shorter than the optimum."""
    rates = [0.0] * len(classes[0][0])
    for times, names in classes:
        for f, t in enumerate(times):
            rates[f] += len(names) / t
    return sum(1.0 / rate for rate in rates)


def _classes(
    farm: Farm, families: Sequence[str], backlog: Mapping[str, tuple[int, float]]
) -> list[tuple[list[float], list[str]]]:
    """The workers of the split (none of a reserved group) grouped by their warm seconds for
    each family's whole backlog, in steps of 2 % (coarser while there are more than
    `_MAX_CLASSES`); each class's seconds are its members' mean. One pass over the workers
    (this runs at every decision), then one over the distinct speeds per coarsening."""
    totals = [backlog[family] for family in families]
    by_rates: dict[tuple[tuple[float, float], ...], list[str]] = {}
    for lane in farm.lanes.values():
        if not group_admits(lane.worker.group, None):
            continue
        key = tuple([farm.rate(lane, family) for family in families])
        found = by_rates.get(key)
        if found is None:
            by_rates[key] = [lane.name]
        else:
            found.append(lane.name)
    marked = []
    for rates, names in by_rates.items():
        times = [
            max(count * fixed_s + work_units / speed, _EPS)
            for (count, work_units), (speed, fixed_s) in zip(totals, rates, strict=True)
        ]
        marked.append((times, [math.log(t) for t in times], names))
    scale = 1.0 / _CLASS_STEP
    while True:
        groups: dict[tuple[int, ...], list[tuple[list[float], list[str]]]] = {}
        for times, marks, names in marked:
            groups.setdefault(tuple([round(m * scale) for m in marks]), []).append((times, names))
        if len(groups) <= _MAX_CLASSES:
            break
        scale /= 2.0
    out = []
    for members in groups.values():
        names = [name for _, group in members for name in group]
        mean = [
            sum(times[f] * len(group) for times, group in members) / len(names)
            for f in range(len(families))
        ]
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
        col := next((j for j in range(n + len(rows)) if objective[j] < -1e-9), None)
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
