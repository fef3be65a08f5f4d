"""The knobs of the `affinity` policy, in one place, each with the case that needs it.

Measured with `python -m bench.scorecard` and the standard scenario (`python -m bench.sim
standard`); every default is the value those runs settled on. Each knob was also switched off
on the default grid (one seed, `affinity[knob=value]` in the simulator): every one of them is
needed by some cells, named below, and the scorecard misses 44 of 84 cells with all four
against 47-51 with any one of them off. `tie_share` came after, from a real card; on the
default grid (one seed) it leaves the count of cells missing a goal as it was (43 of 84).
`plan_s` came last, from the batch cells on mixed farms (2 seeds: 33 of 84 cells miss a goal
with it, 35 without).
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
    models see the least traffic, then to the one holding the fewest models. Needed on real
    cards: two ComfyUI instances on one H200 learned SD1.5 at 4.0 and 4.7 units/s, and ranking
    by exact finish time sent every load of a run of jobs one after another to one of them, so
    a burst that followed found every model on one worker (bench/results/real_gpu.md, run 5).
    The warm tie came from the same cases in the simulator (two `h200-pair` workers): the
    burst's first job, whose model both held, went to the one that alone held both SDXL
    models, and one of them was loaded again beside it (7.2 s against round_robin's 4.7 s;
    4.8 s with the tie). Off (0): like workers are told apart by noise."""
    plan_s: float = 5.0
    """A backlog the farm needs at least this many seconds for (in the fluid limit, loads
    left out) is split by comparative advantage (`plan`): each worker chooses first among the
    families its card is relatively best at. Needed on mixed farms with a backlog (2 seeds):
    batch100 mixed2 makespan 120.4 -> 105.4 s (lower bound 99.3), batch100 mixed4 51.0 ->
    47.8 s, batch500 mixed4 259 -> 238 s (bound 230), batch2000 mixed4 1008 -> 943 s (bound
    926), poisson80 mixed2 mean latency 14.6 -> 13.8 s. Below a few seconds of backlog the
    loads it causes are not repaid: at 0 (always), bursts of 4 on mixed4 pay 8 more loads per
    100 jobs and poisson95 mixed4 9 % more mean latency; at 10 s, batch100 mixed16 keeps 2 of
    its 9 % and session mixed2 loses 7 %. Sessions and Poisson cells move by +-5 % either way
    from seed to seed (seeds 2-5: session mixed2 1.06x, session mixed4 0.93x). Off (inf): the
    greedy rules alone."""
