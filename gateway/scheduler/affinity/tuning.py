"""The knobs of the `affinity` policy, in one place, each with the case that needs it.

Measured with `python -m bench.scorecard` and the standard scenario (`python -m bench.sim
standard`); every default is the value those runs settled on. Each knob was also switched off
on the default grid (one seed, `affinity[knob=value]` in the simulator): every one of them is
needed by some cells, named below, and the scorecard misses 44 of 84 cells with all four
against 47-51 with any one of them off. `tie_share` came after, from a real card; on the
default grid (one seed) it leaves the count of cells missing a goal as it was (43 of 84).
`plan_s` came next, from the batch cells on mixed farms (2 seeds: 33 of 84 cells miss a goal
with it at 30 s or at 5 s, 35 without), and `quiet_gaps` last (6 seeds: 38 of 104 cells miss a
goal, 40 without; 92 of 100 random scenarios of `bench.sweep` within 0.97x, 88 without).

Three more numbers shape placement and live beside their mechanisms, each with its reason:
`gateway.scheduler.settle.SETTLE_S` and `SETTLE_CAP_S` (how long the dispatcher lets a burst's
prompts arrive before it asks any policy) and `tail.TAIL_JOBS` (how many jobs a batch's tail
may trade among: a bound on the work of one step, not a trade-off of placements).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    switch_ratio: float = 4.0
    """A worker with warm work of the same priority pays a load only for a queue whose
    response ratio (load included) is this many times that of its best warm queue. Needed on
    mixed farms at >= 80 % load: without it loads per 100 jobs rise from ~29 to ~35 and goodput
    falls by a third. A ratio, not an age cap: under heavy load waits grow together. Off (1):
    loads per 100 jobs miss in 43 cells instead of 28; batch100 uniform4 and uniform8, batch500
    flags4, burst16 mixed2, poisson80 uniform4 and uniform8 and session uniform4 newly miss a
    goal."""
    patience: float = 1.0
    """A busy worker (one with a job running) loads a model for a queue only once the queue's
    summed wait reaches this many times the load plus the reloads it causes: the ski-rental
    rule, so one load serves the jobs that piled up meanwhile. An idle worker is never held
    by it (work conservation). Off (0): poisson50 mixed4 lru, poisson80 mixed16, uniform4 and
    uniform8 and session uniform4 newly miss a goal (loads, then latency)."""
    slow_ratio: float = 2.5
    """A busy card this many times slower than the fastest card for a family never loads it
    (an idle one is judged by finishing time and the ski-rental bound instead, with no ratio:
    `choice.hold_bound_s`). Needed on mixed farms: an SDXL job on an RTX 4070 Ti runs 3.2x
    its H200 time; at 50 % load this rule took p95 from 9.6 s to 6.7 s and at 80 % goodput
    from 1.40 to 1.60 jobs/s. Off (1000): burst16 mixed2 and mixed4 and poisson80 mixed16
    newly miss a goal."""
    horizon_s: float = 30.0
    """Evicting a model that no waiting job needs costs a share of its reload: the jobs for it
    expected within this many seconds from its recent traffic (at most one reload). Needed at
    80-95 % load, where a popular model evicted now is wanted again within seconds. Off (0):
    burst4 and burst16 mixed2, burst16 mixed4, poisson80 and session uniform4 newly miss a
    goal."""
    tie_share: float = 0.1
    """Where a job goes, workers that would finish it within this share of the earliest finish
    count as tied. A warm job goes to the tied holder that alone holds the fewest models; a
    load to a warm one, then to the one that evicts least, then to the one whose evicted
    models' traffic costs the least reload, then to the one holding the fewest models. Needed
    on real cards: two ComfyUI instances on one H200 learned SD1.5 at 4.0 and 4.7 units/s, and
    ranking by exact finish time sent every load of a run of jobs one after another to one of
    them, so a burst that followed found every model on one worker (bench/results/real_gpu.md,
    run 5).
    The warm tie came from the same cases in the simulator (two `h200-pair` workers): the
    burst's first job, whose model both held, went to the one that alone held both SDXL
    models, and one of them was loaded again beside it (7.2 s against round_robin's 4.7 s;
    4.8 s with the tie). Off (0): like workers are told apart by noise. The same share tells
    a clearly faster holder from a like one for the out-of-turn rule (`choice.first_behind`):
    like cards keep first come, first served (applied to every card, the rule cost flags4,
    all H200s, 7 % of its mean latency at 95 % load, with nothing to match)."""
    plan_s: float = 30.0
    """A backlog the farm needs at least this many seconds for (in the fluid limit, loads
    left out) is split by comparative advantage (`plan`): each worker chooses first among the
    families its card is relatively best at. Needed on mixed farms with a long backlog (2
    seeds): batch100 mixed2 makespan 120.4 -> 108.6 s (lower bound 99.3), batch500 mixed4
    259 -> 238 s (bound 230), batch500 mixed4 lru 280 -> 254 s (bound 247), batch2000 mixed4
    1008 -> 943 s (bound 926). Why not lower: at 5 s, batch100 mixed4 and mixed16 gained 7-9 %
    too, but under sustained load near capacity (the standard scenario at 95 %, 6 seeds) the
    split cost 12 % of the goodput (0.43 against 0.49 good jobs/s): the split orders a
    backlog as if nothing more arrived, and loads and arrivals are what it leaves out. At 30 s
    the 95 % goodput is within noise of none (4 seeds: 0.50 against 0.51), and Poisson,
    session, burst and one-client cells are unchanged. At 0 (always): bursts of 4 on mixed4 pay
    8 more loads per 100 jobs. Off (inf): the greedy rules alone. Once arrivals have stopped
    (`quiet_gaps`) the split applies to any backlog, however short."""
    quiet_gaps: float = 6.0
    """Arrivals have stopped (`plan.settled`) when nothing arrived for this many mean gaps
    between the waiting jobs' arrivals: a batch sent at once at once. Then the split's one
    assumption, that nothing more arrives, holds, and it applies to the backlog's last
    seconds too, where the makespan of a batch is decided. Needed by the batch cells on mixed
    farms (6 seeds, makespan): batch100 mixed2 108.1 -> 104.7 s, mixed4 51.8 -> 49.5, mixed4
    lru 61.9 -> 58.0, mixed16 18.0 -> 16.4, mixed4 gateway 62.7 -> 57.3; burst16 mixed4
    11.3 -> 10.4. Why not lower: at 1.5, a lull in a Poisson stream near capacity passes for
    a stop (poisson95 mixed2 goodput -7 %, mixed4 lru -5 %); at 6 it happens about one
    moment in 400 (e^-6) and no Poisson or session cell got worse by more than 2 % (poisson50
    mixed4 lru, mean latency 3.91 -> 3.98 s). Off (inf): only `plan_s` decides."""
