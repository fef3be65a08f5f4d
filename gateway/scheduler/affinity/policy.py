"""`affinity` (the default policy): late binding by model affinity and measured speed.

Whenever workers have free slots, the one that frees first (the faster on a tie) takes the
next job of the queue it is best placed to serve (`choice`), or stays idle when every queue
is better left to the workers holding its models. A job that needs a load goes, among the
workers free as soon, to the one where it finishes first and, on a tie, whose loss of what it
holds costs least; a warm job, among the holders free as soon, to the one that alone holds the
least. What is guaranteed (each a test in
tests/unit/gateway/scheduler/test_invariants.py):

1. Work conservation with the ski-rental bound: a job never waits while a worker that may run
   it is idle, unless another worker finishes it sooner than the idle one could load and run
   it, and then only until the jobs of its queue have waited beside the idle worker, summed,
   as long as that load plus the idle card's extra run time over the fastest card
   (`choice.hold_bound_s`, `choice.clock_s`): a job alone waits the bound at most, n jobs
   together about 1/n of it each while jobs still arrive; once arrivals have stopped, the
   next job's own wait is the clock. When it waits for the holders of its models, that
   clock starts once the first of them is due to free (`choice.overdue_s`): no load is
   forced just before a holder frees; an idle worker whose load evicts nothing judges the
   holders, while jobs still arrive, on clearing the queue with its arrivals
   (`choice.clear_s`). Nor does a job wait
   behind its group's next one while a slower idle holder finishes it before the clearly
   faster holders, serving the group in order, could reach it (`choice.first_behind`).
2. A burst of jobs on idle workers uses every idle worker that finishes some job sooner than
   the workers already given work would (so every worker that shortens the makespan).
3. Nothing is left waiting forever: a job's response ratio, and the ratio loads are ranked by
   (`choice.Option.first_ratio`), grow with its wait without bound.
4. A job goes to a worker that finishes it within `Tuning.tie_share` of the earliest
   (`choice.land`): a warm job to the holder that alone holds the fewest models; a load to a
   warm one, then the least eviction cost, then the least reload that the traffic of what it
   evicts will cost, then the fewest models held.
5. A load goes where it shortens a queue most (`choice.Option.gain_s`): a queue no worker
   holds first, then the one whose holders would finish it last. So does the warm work of an
   idle worker choosing among jobs that all arrived while it sat idle (a burst); a job that
   waited before it went idle is served first, oldest first.
6. While a backlog lasts (`Tuning.plan_s`), each worker chooses first among the families its
   card is relatively best at (`plan`): the split that finishes the backlog soonest in the
   fluid limit stays open to every worker's choices, and like cards are never restricted.
7. Once arrivals have stopped, a call that places every waiting job (at most
   `tail.TAIL_JOBS`), one per worker, trades them pairwise so the longest go to the workers
   that free first (`tail`): the latest expected finish is never later, and the summed
   finishes never larger, than the rules' placement (the one exception to 4: the shorter job
   of a trade may go to a worker that finishes it later than another; tests in test_tail.py).

The policy sees the queue as groups (`gateway.scheduler.queue`), so a decision costs
workers x groups, whatever the number of waiting jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from gateway.scheduler.affinity.choice import (
    Need,
    Option,
    best_option,
    is_idle,
    land,
    landing,
    peers,
)
from gateway.scheduler.affinity.lanes import Lane, advance, cost_on, lanes_of, mean_speed
from gateway.scheduler.affinity.plan import Plan, first_choices, plan_of, settled
from gateway.scheduler.affinity.search import Search
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tail import TAIL_JOBS, rematch
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, is_warm
from gateway.scheduler.policy import Policy, register
from gateway.scheduler.queue import groups_of
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, Why


def next_lane(farm: Farm, done: set[str]) -> Lane | None:
    """The lane with a free slot that frees first (the faster card on a tie)."""
    best: Lane | None = None
    best_key: tuple[float, float, str] | None = None
    for lane in farm.lanes.values():
        if lane.slots <= 0 or lane.name in done:
            continue
        key = (max(lane.ready_s, farm.now_s), -mean_speed(lane.worker), lane.name)
        if best_key is None or key < best_key:
            best, best_key = lane, key
    return best


def loader(
    option: Option, chooser: Lane, farm: Farm, need: Need, done: set[str], tuning: Tuning
) -> Lane:
    """Where the next job of the queue `chooser` would serve goes: among the lanes free no
    later than the chooser (those warm for it, if the chooser is), as `choice.land` picks; a
    job the chooser takes from behind the queue's next one stays with it. An idle lane that
    left every queue to others (`done`, idle) is still a candidate: it left them because
    another finishes them sooner, and `land` weighs exactly that (a like card within the tie
    that evicts less takes the load)."""
    if option.behind:
        return chooser
    job = option.queue.first
    free_at_s = max(chooser.ready_s, farm.now_s)
    candidates = [
        lane
        for lane in peers(option, chooser, farm)
        if lane.slots > 0
        and (lane.name not in done or is_idle(lane))
        and max(lane.ready_s, farm.now_s) <= free_at_s
        and can_run(job, lane.worker)
    ]
    return land([(lane, landing(lane, job, farm, need)) for lane in candidates], job, farm, tuning)


def explain(job: JobView, target: Lane, farm: Farm, plan: Plan | None = None) -> Why:
    """The expected seconds until `job` finishes on `target` and on the best other lane, and
    what the backlog's split gave `target` first."""

    def done_s(lane: Lane) -> float:
        return max(lane.ready_s - farm.now_s, 0.0) + cost_on(lane, job)

    others = [
        (done_s(lane), lane.name)
        for lane in farm.lanes.values()
        if lane.name != target.name and can_run(job, lane.worker)
    ]
    best = min(others, default=None)
    return Why(
        reason="warm" if is_warm(job, target.resident) else "load",
        done_s=done_s(target),
        runner_up=best[1] if best else None,
        runner_up_done_s=best[0] if best else None,
        first_choices=first_choices(plan, target.name),
    )


def place(
    snapshot: Snapshot, queues: Sequence[Queue], tuning: Tuning, *, prune: bool = True
) -> list[Assignment]:
    """The call's assignments, in the order they are made. `prune=False` evaluates every
    lane against every queue at every step, as the rules read: the reference that
    `search.Search` (the default) must agree with, assignment by assignment."""
    return [step for step in steps(snapshot, queues, tuning, prune=prune) if step is not None]


def steps(
    snapshot: Snapshot, queues: Sequence[Queue], tuning: Tuning, *, prune: bool = True
) -> Iterator[Assignment | None]:
    """`place` in steps, each of them work over the workers or over the groups once (one
    lane's choice, one part of the set-up): an assignment, or None where a step made none."""
    lanes = lanes_of(snapshot)
    yield None
    farm = Farm.of(snapshot, lanes, (q.first.family for q in queues))
    yield None
    need = Need(
        waiting=frozenset(key for queue in queues for key in queue.models),
        demand_per_s=snapshot.demand_per_s,
        settled=settled(farm.now_s, queues, tuning.quiet_gaps),
    )
    plan = plan_of(farm, queues, tuning, need.settled)
    yield None
    waiting = sum(queue.count for queue in queues)  # before the rules take any
    tail = need.settled and waiting <= min(len(lanes), TAIL_JOBS)
    # The jobs a tail may trade, as the call began (a job taken out of turn leaves the head).
    shown = {job.job_id: job for queue in queues for job in queue.head} if tail else {}
    if prune:
        search = Search(farm, need, queues, tuning, plan)
        yield None
        made: Iterator[Assignment | None] = search.run()
    else:
        made = _every_option(farm, need, queues, tuning, plan)
    if not tail:
        yield from made
        return
    # A batch's last jobs, one worker each at most: traded so the longest go to the workers
    # that free first (`tail`), once the rules have placed every one of them.
    placed = []
    for step in made:
        if step is not None:
            placed.append(step)
        yield None
    if len(placed) < waiting:
        yield from placed
        return
    yield from rematch(placed, shown, lanes, farm.now_s)


def _every_option(
    farm: Farm, need: Need, queues: Sequence[Queue], tuning: Tuning, plan: Plan | None
) -> Iterator[Assignment]:
    done: set[str] = set()
    while (lane := next_lane(farm, done)) is not None:
        option = best_option(lane, queues, farm, need, is_idle(lane), tuning, plan)
        if option is None:
            done.add(lane.name)
            continue
        target = loader(option, lane, farm, need, done, tuning)
        job = option.queue.take(option.behind)
        why = replace(explain(job, target, farm, plan), ahead_of=option.behind)
        farm.replace(advance(target, job))
        yield Assignment(job.job_id, target.name, why)
        # An idle worker that left its queues to busier holders looks again: they are busier.
        done -= {name for name in done if is_idle(farm.lanes[name])}


@dataclass(frozen=True)
class AffinityPolicy:
    tuning: Tuning = field(default_factory=Tuning)
    name: str = "affinity"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return [step for step in self.steps(snapshot) if step is not None]

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]:
        """`assign` in bounded steps (`policy.Stepwise`)."""
        queues = [Queue.of(group) for group in groups_of(snapshot)]
        yield None
        yield from steps(snapshot, queues, self.tuning)


@register("affinity")
def make_affinity() -> Policy:
    return AffinityPolicy()
