"""Which jobs of one model's queue a worker should serve, given who else holds that model.

Water-filling: the jobs, oldest first, each go to whichever server would finish them first: the
worker that asks (from `start_s`, after any load) or one of the other workers that already hold
the model (from when they free). A worker that must load the model first wins a job only if it
finishes it at least `margin_s` sooner, so a load is spent only where it clearly pays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.scheduler.cost import run_s
from gateway.scheduler.lanes import Lane
from gateway.scheduler.snapshot import JobView, WorkerView


def _best_holder(job: JobView, holders: Sequence[WorkerView], ready: list[float]) -> int:
    done = [ready[i] + run_s(job, worker) for i, worker in enumerate(holders)]
    return min(range(len(done)), key=done.__getitem__)


@dataclass(frozen=True)
class Share:
    jobs: tuple[JobView, ...]
    """The jobs (a subsequence of the queue) the asking worker would serve, in order."""
    theirs_s: float = math.inf
    """When the holders would have finished the first of them (inf: no holder)."""


def water_fill(
    lane: Lane,
    holders: Sequence[Lane],
    jobs: Sequence[JobView],
    start_s: float,
    margin_s: float = 0.0,
) -> Share:
    """The share of `jobs` that `lane` would serve, starting at `start_s`."""
    workers = [holder.worker for holder in holders]
    ready = [holder.ready_s for holder in holders]
    mine_s = start_s
    out: list[JobView] = []
    first_theirs_s = math.inf
    for job in jobs:
        mine_done = mine_s + run_s(job, lane.worker)
        theirs_done = math.inf
        best = -1
        if workers:
            best = _best_holder(job, workers, ready)
            theirs_done = ready[best] + run_s(job, workers[best])
        # A warm asker wins ties, so two idle holders never leave a job to each other.
        if mine_done + margin_s < theirs_done or (margin_s <= 0 and mine_done <= theirs_done):
            if not out:
                first_theirs_s = theirs_done
            out.append(job)
            mine_s = mine_done
        else:
            ready[best] = theirs_done
    return Share(tuple(out), first_theirs_s)
