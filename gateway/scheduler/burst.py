"""Planning a burst as a whole: many jobs submitted together are placed for the makespan.

`is_burst` tells a burst from ordinary traffic: many waiting jobs that arrived within a short
window. `plan` bisects on the makespan: for a trial deadline it places the models whose jobs
are fussiest about the card (the largest gap between their best and second-best card) first,
the biggest first among equals, each job on the worker where it costs least relative to its
fastest card (its load included) among those that still finish by the deadline. So each card
takes the work it is relatively best at, a model's jobs run in blocks behind one load, and a
big model is split over workers only where the deadline needs it. Each worker then runs the
models it already holds first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.scheduler.cost import can_run, run_s
from gateway.scheduler.lanes import Lane, advance, cost_on
from gateway.scheduler.snapshot import JobView


def is_burst(jobs: Sequence[JobView], window_s: float, min_jobs: int) -> bool:
    """Whether at least `min_jobs` waiting jobs arrived within `window_s` of each other."""
    if len(jobs) < min_jobs:
        return False
    times = sorted(job.enqueued_at_s for job in jobs)
    return any(
        times[i + min_jobs - 1] - times[i] <= window_s for i in range(len(times) - min_jobs + 1)
    )


def regret(job: JobView, lanes: Sequence[Lane]) -> float:
    """How much slower its second-best card type is than its best (1 if all are alike)."""
    runs = sorted(
        {round(run_s(job, lane.worker), 6) for lane in lanes if can_run(job, lane.worker)}
    )
    return runs[1] / runs[0] if len(runs) > 1 and runs[0] > 0 else 1.0


def _order(
    groups: Mapping[frozenset[str], Sequence[JobView]], lanes: Sequence[Lane]
) -> list[Sequence[JobView]]:
    def key(jobs: Sequence[JobView]) -> tuple[float, float]:
        work = sum(
            min(
                (run_s(job, lane.worker) for lane in lanes if can_run(job, lane.worker)),
                default=0.0,
            )
            for job in jobs
        )
        fussiness = sum(regret(job, lanes) for job in jobs) / len(jobs)
        return (-round(fussiness, 1), -work)

    return sorted((jobs for jobs in groups.values() if jobs), key=key)


def _fits(job: JobView, lanes: Mapping[str, Lane], limit_s: float, best_s: float) -> Lane | None:
    """Where `job` goes in a plan that must end by `limit_s`: among the workers where it fits,
    the one where it costs least (load included) relative to its fastest card, so each card
    takes the work it is best at and a model's jobs stay where it was loaded; None if none
    fits."""
    fitting = [
        lane
        for lane in lanes.values()
        if can_run(job, lane.worker) and lane.ready_s + cost_on(lane, job) <= limit_s
    ]

    def key(lane: Lane) -> tuple[float, float, str]:
        return (cost_on(lane, job) / best_s, lane.ready_s, lane.name)

    return min(fitting, key=key, default=None)


def _place(
    order: Sequence[Sequence[JobView]], lanes: Mapping[str, Lane], limit_s: float
) -> dict[str, list[JobView]] | None:
    state = dict(lanes)
    out: dict[str, list[JobView]] = {name: [] for name in lanes}
    for jobs in order:
        for job in jobs:
            best_s = min(run_s(job, lane.worker) for lane in lanes.values())
            lane = _fits(job, state, limit_s, best_s)
            if lane is None:
                return None
            state[lane.name] = advance(lane, job)
            out[lane.name].append(job)
    return out


def plan(
    lanes: Mapping[str, Lane],
    groups: Mapping[frozenset[str], Sequence[JobView]],
    now_s: float,
    rounds: int = 16,
) -> dict[str, list[JobView]]:
    """Every waiting job placed on a worker, in the order each should run them: the plan that
    fits the shortest makespan found by bisection (each trial a greedy placement)."""
    start = {
        name: Lane(lane.worker, max(lane.ready_s, now_s), lane.resident, 10**9)
        for name, lane in lanes.items()
    }
    order = _order(groups, list(start.values()))
    runnable = [
        [job for job in jobs if any(can_run(job, lane.worker) for lane in start.values())]
        for jobs in order
    ]
    best = _place(runnable, start, float("inf"))
    assert best is not None
    high = max(
        (
            start[name].ready_s + sum(cost for cost in _costs(start[name], jobs))
            for name, jobs in best.items()
        ),
        default=now_s,
    )
    low = now_s
    for _ in range(rounds):
        middle = (low + high) / 2
        trial = _place(runnable, start, middle)
        if trial is None:
            low = middle
        else:
            best, high = trial, middle
    return {name: _resident_first(start[name], jobs) for name, jobs in best.items()}


def _resident_first(lane: Lane, jobs: Sequence[JobView]) -> list[JobView]:
    """The worker's jobs with those it can run without a load first: the plan's makespan does
    not depend on the order of its blocks, and a load deferred is a load the next call may
    still avoid."""
    return sorted(jobs, key=lambda job: cost_on(lane, job) > run_s(job, lane.worker) + 1e-9)


def _costs(lane: Lane, jobs: Sequence[JobView]) -> list[float]:
    out = []
    for job in jobs:
        out.append(cost_on(lane, job))
        lane = advance(lane, job)
    return out
