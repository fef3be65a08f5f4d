"""`random`: each waiting job goes to a uniformly drawn eligible worker with a free slot.

The draw is a hash of the job id and a seed, so the policy stays a pure function of the snapshot
(the same job always draws the same number) and runs are reproducible.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from gateway.scheduler.cost import can_run
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.snapshot import Assignment, Snapshot


def draw(job_id: str, seed: int) -> int:
    """A stable pseudo-random number for one job."""
    return zlib.crc32(f"{seed}:{job_id}".encode())


@dataclass(frozen=True)
class RandomPolicy:
    """Model- and speed-blind placement; a baseline."""

    seed: int = 0
    name: str = "random"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        free = {worker.name: worker.free_slots for worker in snapshot.workers}
        out: list[Assignment] = []
        for job in snapshot.jobs:
            choices = [w.name for w in snapshot.workers if free[w.name] > 0 and can_run(job, w)]
            if not choices:
                continue
            name = choices[draw(job.job_id, self.seed) % len(choices)]
            free[name] -= 1
            out.append(Assignment(job.job_id, name))
        return out


@register("random", early=True)
def make_random() -> Policy:
    return RandomPolicy()
