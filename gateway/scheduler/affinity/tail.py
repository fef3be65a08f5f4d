"""The last jobs of a batch: the longest goes to the worker that frees first.

Once arrivals have stopped (`plan.settled`) and one call places every job still waiting, each
on a worker that takes no other in that call, which job goes where leaves the sum of their
expected finishes almost as it is (on like cards exactly: every worker starts one job when it
frees), but decides when the last of them finishes. The rules of `choice` pick jobs one worker
at a time, the cheapest to start first (guarantee 3), so the short job can go to the worker
free now and the long one behind a busy worker, finishing a whole long run later than the other
way round: the quick start's four mixed jobs on two idle RTX 4070 Tis ended on an SD1.5 job on
the free card and an SDXL one behind the other's SDXL job, 20.9 s against 17.7 s for
`swarm_like` (simulated, seed 6).

So such a call's placements are re-matched a pair at a time (`rematch`): two jobs trade
workers where that makes the later of the two finish sooner and their sum no later, until no
pair can. The guarantee (tests/unit/gateway/scheduler/test_tail.py): the re-matched placements'
latest expected finish is no later, and their summed expected finishes no larger, than those
the rules made; each job goes to a worker it may run on, each worker gets as many jobs as the
rules gave it, and jobs of different priorities, or a call that leaves any job waiting, are
left as the rules placed them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gateway.scheduler.affinity.lanes import Lane, cost_on
from gateway.scheduler.cost import can_run, is_warm
from gateway.scheduler.snapshot import Assignment, JobView

SLACK_S = 1e-6
"""Seconds within which two sums count as equal (float rounding)."""

Finish = Callable[[str, str], float]
"""When a job (by id) would finish on a worker (by name)."""


def rematch(
    made: Sequence[Assignment],
    jobs: Mapping[str, JobView],
    lanes: Mapping[str, Lane],
    now_s: float,
) -> list[Assignment]:
    """`made`, its jobs traded between the workers that got one job each, pair by pair, while
    a trade makes the later of the two finish sooner (as `lanes`, the workers before the call,
    expect) and their sum no later. Ends: each trade replaces the pair's later finish with two
    earlier ones, so the finishes sorted latest first fall in lexicographic order."""
    given = [a.worker for a in made]
    single = [a for a in made if given.count(a.worker) == 1]
    if len({jobs[a.job_id].priority for a in single}) > 1:
        return list(made)

    def finish_s(job_id: str, worker: str) -> float:
        lane = lanes[worker]
        return max(lane.ready_s, now_s) + cost_on(lane, jobs[job_id])

    where = {a.job_id: a.worker for a in single}
    while _trade(where, jobs, lanes, finish_s):
        pass
    return [_moved(a, where.get(a.job_id, a.worker), jobs, lanes, finish_s, now_s) for a in made]


def _trade(
    where: dict[str, str], jobs: Mapping[str, JobView], lanes: Mapping[str, Lane], finish_s: Finish
) -> bool:
    """Make the first trade that helps; whether one did."""
    ids = list(where)
    for i, first in enumerate(ids):
        for second in ids[i + 1 :]:
            a, b = where[first], where[second]
            if not can_run(jobs[first], lanes[b].worker):
                continue
            if not can_run(jobs[second], lanes[a].worker):
                continue
            kept = (finish_s(first, a), finish_s(second, b))
            traded = (finish_s(first, b), finish_s(second, a))
            if max(traded) < max(kept) - SLACK_S and sum(traded) <= sum(kept) + SLACK_S:
                where[first], where[second] = b, a
                return True
    return False


def _moved(
    made: Assignment,
    worker: str,
    jobs: Mapping[str, JobView],
    lanes: Mapping[str, Lane],
    finish_s: Finish,
    now_s: float,
) -> Assignment:
    """`made` sent to `worker` instead, its why saying so: the worker the rules chose is the
    runner-up."""
    if worker == made.worker:
        return made
    why = made.why
    if why is not None:
        why = replace(
            why,
            reason="warm" if is_warm(jobs[made.job_id], lanes[worker].resident) else "load",
            done_s=finish_s(made.job_id, worker) - now_s,
            runner_up=made.worker,
            runner_up_done_s=finish_s(made.job_id, made.worker) - now_s,
            first_choices=(),
        )
    return Assignment(made.job_id, worker, why)
