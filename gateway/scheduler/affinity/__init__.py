"""`affinity` (the default policy): model affinity weighted by measured speed, late binding.

Whenever workers have free slots, each, in the order they free, takes the next job of the best
block of one model's queue for it, or stays idle. Everything is in seconds of expected cost
(`cost`: wait + load of what is not resident + work / measured speed):

- A block is the share of a model's queue the worker would serve (`share.water_fill`): the jobs
  it finishes before the workers already holding that model, by a margin of its own load time
  if it must load. So a job is left to a clearly faster or warm worker, and a hot model gets a
  second copy exactly when its queue outgrows what its warm copies can serve.
- Blocks are ranked by response ratio with the load in it, (waited + load + eviction cost +
  run) / (load + eviction cost + run), scaled by the card's comparative advantage for the work.
  A worker with warm work loads another model only for a block `switch_ratio` times more
  urgent. The ratio is scale-free: under heavy load all waits grow together, blocks grow, and
  each load serves more jobs, which keeps the farm stable where an age cap collapses it into
  first come, first served.
- A load also passes: enough summed waiting to pay for it (patience), never a card much slower
  than another for that family, a small block that evicts a needed model waits for company
  (up to `hold_s`, scaled down on a quiet farm; where such blocks are most of the queue, as
  with many checkpoints on few workers, only for a stricter ski-rental wait), a worker holding
  a popular model leaves the load to one holding a colder one, and an idle worker leaves its
  model only for a block worth more than the traffic of that model it would serve by staying
  (`externality`).
- A burst (many jobs arriving together) is planned as a whole for the makespan (`burst`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gateway.scheduler.affinity.blocks import choose
from gateway.scheduler.affinity.context import context, groups_of
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.burst import is_burst, plan
from gateway.scheduler.cost import models_of
from gateway.scheduler.lanes import Lane, advance, lanes_of, mean_speed
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot

__all__ = ["AffinityPolicy", "Tuning", "make_affinity", "make_affinity_eager"]


def next_lane(lanes: dict[str, Lane], done: set[str]) -> Lane | None:
    """The lane with a free slot that frees first (the faster card on a tie)."""
    open_lanes = [lane for lane in lanes.values() if lane.slots > 0 and lane.name not in done]
    return min(
        open_lanes,
        key=lambda lane: (lane.ready_s, -mean_speed(lane.worker), lane.name),
        default=None,
    )


def follow(planned: dict[str, list[JobView]], lanes: dict[str, Lane]) -> list[Assignment]:
    """The first jobs of each worker's plan, as many as it has free slots."""
    return [
        Assignment(job.job_id, name)
        for name, jobs in planned.items()
        for job in jobs[: lanes[name].slots]
    ]


@dataclass(frozen=True)
class AffinityPolicy:
    tuning: Tuning = field(default_factory=Tuning)
    name: str = "affinity"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        lanes = lanes_of(snapshot)
        groups = groups_of(snapshot.jobs)
        burst_jobs = max(self.tuning.burst_per_worker * len(lanes), 2)
        if is_burst(snapshot.jobs, self.tuning.burst_window_s, burst_jobs):
            return follow(plan(lanes, groups, snapshot.now_s), lanes)
        base = context(snapshot, lanes, groups, self.tuning)
        done: set[str] = set()
        out: list[Assignment] = []
        while (lane := next_lane(lanes, done)) is not None:
            job = choose(lane, groups, replace(base, lanes=lanes))
            if job is None:
                done.add(lane.name)
                continue
            groups[models_of(job)].remove(job)
            lanes = {**lanes, lane.name: advance(lane, job)}
            out.append(Assignment(job.job_id, lane.name))
        return out


@register("affinity")
def make_affinity() -> Policy:
    return AffinityPolicy()


@register("affinity_eager")
def make_affinity_eager() -> Policy:
    """No hold on small loads: more loads, more goodput where loads are cheap and most jobs
    are for rare models (many checkpoints on uniform cards)."""
    return AffinityPolicy(Tuning(hold_jobs=0), name="affinity_eager")
