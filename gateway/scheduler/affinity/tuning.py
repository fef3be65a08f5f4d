"""The knobs of the `affinity` policy, with the values the simulator settled on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    switch_ratio: float = 8.0
    """A worker with warm work pays a load only for a block whose response ratio (load
    included) is this many times that of its best warm block. A ratio, not an age cap: under
    heavy load every wait grows together, so switches thin out instead of multiplying."""
    switch_margin: float = 2.0
    """A worker that must load a model wins a job from the workers already holding it only if it
    finishes the job this many of its load times sooner."""
    patience: float = 1.0
    """A load waits until its block's summed wait reaches this many times its load plus the
    eviction cost (a ski-rental rule)."""
    hold_s: float = 12.0
    """A block of fewer than `hold_jobs` jobs that evicts something needed waits until its
    oldest job has waited this long (and until a worker holding the model would not serve it
    within that time), so a rare model's jobs share one load..."""
    hold_jobs: int = 4
    hold_backlog: float = 2.0
    """...but at most this many times the farm's backlog per worker: as long as jobs wait anyway,
    and not at all on an idle farm."""
    hold_share: float = 0.5
    """...and only while the jobs it would defer (small queues of models no worker holds) are at
    most this share of the waiting jobs. Past it (many checkpoints on few workers) the rare
    models are most of the work: holding them makes most jobs late without sparing many loads."""
    hold_patience: float = 4.0
    """Past `hold_share`, such a block waits instead until its summed wait reaches this many
    times its load plus the eviction cost (the ski-rental rule of `patience`, stricter)."""
    slow_ratio: float = 2.0
    """A card this many times slower than another eligible card for a job never loads it."""
    stay_weight: float = 1.0
    """An idle worker leaves its model for a cold block only if the block yields more weighted
    jobs per second than this times the rate of its model's jobs it would serve by staying."""
    age_scale_s: float = 10.0
    """For that comparison a job weighs 1 + its wait / age_scale_s."""
    horizon_s: float = 10.0
    """How far ahead the demand for an evicted model counts in the eviction cost."""
    defer: bool = True
    """Leave a load to a worker that frees in time and gives up less by leaving its model."""
    advantage: bool = True
    """Scale a block's ratio by how much faster this card runs it than the best other card
    (comparative advantage: each card favours the work it is relatively best at)."""
    pick_window: int = 16
    """From the chosen block, take the job this card is relatively best at among the oldest
    this many (a big SD1.5 job to the fast card, a small one to the slow card: the split the
    capacity bound assumes); the oldest among equals."""
    group_limit: int = 64
    """Jobs considered per model (the oldest)."""
    burst_window_s: float = 2.0
    burst_per_worker: int = 4
    """At least this many waiting jobs per worker arriving within `burst_window_s` make a burst,
    planned as a whole for the makespan (`burst.plan`)."""
