"""Three simple placement policies: round robin, least outstanding, and sticky by checkpoint.

They walk the waiting jobs in queue order and give each to an eligible worker with a free
slot; they differ only in which worker. They bind early (`policy.EARLY_BINDING`): each job goes
to its worker's queue on arrival, as a proxy in front of ComfyUI queues does. The full
cost-based scheduler lives elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gateway.scheduler import cost
from gateway.scheduler.policy import register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView

Pick = Callable[[JobView, Sequence[WorkerView]], WorkerView]


def eligible(job: JobView, worker: WorkerView) -> bool:
    return worker.free_slots > 0 and cost.can_run(job, worker)


def greedy(snapshot: Snapshot, pick: Pick) -> list[Assignment]:
    """Queue order; each job to `pick(job, candidates)`; slots and last checkpoints updated."""
    workers = {worker.name: worker for worker in snapshot.workers}
    out: list[Assignment] = []
    for job in snapshot.jobs:
        candidates = [w for w in workers.values() if eligible(job, w)]
        if not candidates:
            continue
        chosen = pick(job, candidates)
        out.append(Assignment(job.job_id, chosen.name))
        workers[chosen.name] = replace(
            chosen,
            free_slots=chosen.free_slots - 1,
            outstanding=chosen.outstanding + 1,
            last_checkpoint=job.checkpoint or chosen.last_checkpoint,
        )
    return out


def _least_outstanding(candidates: Sequence[WorkerView]) -> WorkerView:
    return min(candidates, key=lambda w: (w.outstanding, -w.free_slots, w.name))


@dataclass
class RoundRobin:
    """Workers in turn, by name; the turn carries over between calls (its only state)."""

    name: str = "round_robin"
    turn: int = 0

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return greedy(snapshot, self._pick)

    def _pick(self, job: JobView, candidates: Sequence[WorkerView]) -> WorkerView:
        ordered = sorted(candidates, key=lambda w: w.name)
        chosen = ordered[self.turn % len(ordered)]
        self.turn += 1
        return chosen


@dataclass(frozen=True)
class LeastOutstanding:
    """The worker holding the fewest unfinished jobs."""

    name: str = "least_outstanding"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return greedy(snapshot, lambda job, candidates: _least_outstanding(candidates))


@dataclass(frozen=True)
class Sticky:
    """A worker whose last job used the same checkpoint, else the least outstanding one."""

    name: str = "sticky"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return greedy(snapshot, self._pick)

    @staticmethod
    def _pick(job: JobView, candidates: Sequence[WorkerView]) -> WorkerView:
        same = [w for w in candidates if job.checkpoint and w.last_checkpoint == job.checkpoint]
        return _least_outstanding(same or candidates)


register("round_robin", early=True)(RoundRobin)
register("least_outstanding", early=True)(LeastOutstanding)
register("sticky", early=True)(Sticky)
