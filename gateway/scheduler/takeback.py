"""Taking back a job prefetched behind a long one, for a worker that went idle.

A late binder lets each worker hold one running job and a few prefetched ones, so a worker
never waits for the gateway between two jobs. The price: a job prefetched behind a long one
waits for it even when another worker goes idle (24 s instead of 0.1 s). When an idle worker
(holding nothing) would finish such a job at least `min_gain_s` sooner than its holder, the
dispatcher withdraws it from the holder and sends it there.

"Sooner" counts what the idle worker must load: a holder that frees before a cold card has
loaded keeps its job (the ski-rental bound of the design). Pure: the dispatcher asks the worker
to drop the job and takes it back only if the worker confirms it had not started it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gateway.scheduler import cost
from gateway.scheduler.snapshot import JobView, Why, WorkerView

MIN_GAIN_S = 1.0
"""Seconds a move must save: a withdrawal and a second send cost a few round trips, and the
estimates it compares are rough."""


@dataclass(frozen=True)
class TakeBack:
    job_id: str
    holder: str
    """The worker that holds it prefetched."""
    worker: str
    """The idle worker it goes to."""
    gain_s: float
    """Expected seconds it finishes sooner there."""
    done_s: float
    """Expected seconds until it finishes there."""
    warm: bool
    """Its models are resident there."""

    @property
    def why(self) -> Why:
        """Why it went there, as a policy's choice says (`/history`'s `gateway` block): its
        expected finish there, and on its holder, the runner-up."""
        reason = "warm" if self.warm else "load"
        return Why(reason, self.done_s, self.holder, self.done_s + self.gain_s)


def finish_times(holder: WorkerView, queued: Sequence[JobView]) -> dict[str, float]:
    """Expected seconds until each job the holder has not started finishes there, `queued` in
    the order it runs them: the rest of what it started, then each queued job in turn."""
    costs: list[float] = []
    resident = holder.resident
    for job in queued:
        costs.append(cost.load_s(job, holder, resident) + cost.run_s(job, holder))
        resident = cost.touch(resident, cost.models_of(job), holder.cache_slots)
    done_s = max(holder.outstanding_s - sum(costs), 0.0)
    finish: dict[str, float] = {}
    for job, seconds in zip(queued, costs, strict=True):
        done_s += seconds
        finish[job.job_id] = done_s
    return finish


def is_idle(worker: WorkerView) -> bool:
    """It holds nothing and may take a job."""
    return worker.outstanding == 0 and worker.free_slots > 0


def take_backs(
    workers: Iterable[WorkerView],
    queued: Mapping[str, Sequence[JobView]],
    min_gain_s: float = MIN_GAIN_S,
) -> list[TakeBack]:
    """The prefetched jobs to move, largest gain first: `queued` holds, by worker, the jobs it
    has not started, in the order it runs them. Each idle worker gets at most one, each
    holder gives at most one per call (its other jobs move up once one leaves, so their gains
    are judged again next time), and only to a worker that may run it."""
    views = {worker.name: worker for worker in workers}
    idle = [worker for worker in views.values() if is_idle(worker)]
    options = [
        option
        for name, jobs in queued.items()
        if name in views and jobs
        for option in _options(views[name], jobs, idle)
        if option.gain_s >= min_gain_s
    ]
    chosen: list[TakeBack] = []
    holders: set[str] = set()
    takers: set[str] = set()
    for option in sorted(options, key=lambda o: (-o.gain_s, o.job_id, o.worker)):
        if option.holder not in holders and option.worker not in takers:
            chosen.append(option)
            holders.add(option.holder)
            takers.add(option.worker)
    return chosen


def _options(
    holder: WorkerView, jobs: Sequence[JobView], idle: Sequence[WorkerView]
) -> list[TakeBack]:
    finish = finish_times(holder, jobs)
    return [
        _move(job, holder.name, worker, finish[job.job_id])
        for job in jobs
        for worker in idle
        if worker.name != holder.name and cost.can_run(job, worker)
    ]


def _move(job: JobView, holder: str, worker: WorkerView, holder_done_s: float) -> TakeBack:
    """`job` moved from `holder`, where it finishes in `holder_done_s`, to the idle `worker`."""
    done_s = cost.completion_s(job, worker)
    warm = cost.is_warm(job, worker.resident)
    return TakeBack(job.job_id, holder, worker.name, holder_done_s - done_s, done_s, warm)
