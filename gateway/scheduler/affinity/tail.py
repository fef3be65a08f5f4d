"""The last jobs of a batch: the longest goes to the worker that frees first.

Once arrivals have stopped (`plan.settled`) and one call places every job still waiting (at
most `TAIL_JOBS`), which of the jobs given to workers that got one each goes where leaves the
sum of their expected finishes almost as it is (on like cards exactly: every such worker
starts one job when it frees), but decides when the last of them finishes. The rules of
`choice` pick jobs one worker at a time, the cheapest to start first (guarantee 3), so the
short job can go to the worker free now and the long one behind a busy worker, finishing a
whole long run later than the other way round: the quick start's four mixed jobs on two idle
RTX 4070 Tis ended on an SD1.5 job on the free card and an SDXL one behind the other's SDXL
job, 20.9 s against 17.7 s for `swarm_like` (simulated, seed 6).

So such a call's placements are re-matched a pair at a time (`rematch`): two jobs trade
workers where that makes the later of the two finish sooner and their sum no later, until no
pair can. The guarantee (tests/unit/gateway/scheduler/test_tail.py): the re-matched placements'
latest expected finish is no later, and their summed expected finishes no larger, than those
the rules made; each job goes to a worker it may run on, each worker gets as many jobs as the
rules gave it, a worker given two keeps them, and jobs of different priorities, or a call
that leaves any job waiting or places more than `TAIL_JOBS`, are left as the rules placed
them. A traded job's `Why` names the worker the rules chose as its runner-up, which may
finish it sooner: the shorter job of a trade gives up its earliest finish for the longer
one's (the one exception to guarantee 4, and a trade may override the backlog's split, 6).
Every node of a farm trades alike only if it sees the farm alike: a job a trade gives to
another node's worker that its own node placed elsewhere waits for the next round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from gateway.scheduler.affinity.lanes import Lane, cost_on
from gateway.scheduler.cost import can_run, is_warm
from gateway.scheduler.snapshot import Assignment, JobView

TAIL_JOBS = 16
"""At most this many waiting jobs make a batch's tail: a trade is looked for among every pair
of them, in passes until one trades none, which at 16 costs at most about a millisecond (0.8 ms,
the slowest of 50 random farms of 16 workers, on 2 cores); the loop serves no one meanwhile."""
SLACK_S = 1e-6
"""Seconds within which two sums count as equal (float rounding): the summed finishes may
grow by this much per trade."""


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
    given = Counter(a.worker for a in made)
    single = [a for a in made if given[a.worker] == 1]
    if len({jobs[a.job_id].priority for a in single}) > 1:
        return list(made)

    where = {a.job_id: a.worker for a in single}
    workers = set(where.values())
    finishes = {
        (job_id, worker): max(lanes[worker].ready_s, now_s) + cost_on(lanes[worker], jobs[job_id])
        for job_id in where
        for worker in workers
        if can_run(jobs[job_id], lanes[worker].worker)
    }
    while _trades(where, finishes):
        pass
    return [_moved(a, where.get(a.job_id, a.worker), jobs, lanes, finishes, now_s) for a in made]


def _trades(where: dict[str, str], finishes: Mapping[tuple[str, str], float]) -> bool:
    """One pass over every pair, trading each that helps; whether any did. (A pair absent
    from `finishes` may not run where the other runs.)"""
    traded_any = False
    ids = list(where)
    for i, first in enumerate(ids):
        for second in ids[i + 1 :]:
            a, b = where[first], where[second]
            first_there, second_there = finishes.get((first, b)), finishes.get((second, a))
            if first_there is None or second_there is None:
                continue
            traded = (first_there, second_there)
            kept = (finishes[first, a], finishes[second, b])
            if max(traded) < max(kept) - SLACK_S and sum(traded) <= sum(kept) + SLACK_S:
                where[first], where[second] = b, a
                traded_any = True
    return traded_any


def _moved(
    made: Assignment,
    worker: str,
    jobs: Mapping[str, JobView],
    lanes: Mapping[str, Lane],
    finishes: Mapping[tuple[str, str], float],
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
            done_s=finishes[made.job_id, worker] - now_s,
            runner_up=made.worker,
            runner_up_done_s=finishes[made.job_id, made.worker] - now_s,
            first_choices=(),
        )
    return Assignment(made.job_id, worker, why)
