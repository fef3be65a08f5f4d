"""How fast each instance runs each model family, learned online from finished jobs.

The model is the one `cost.run_s` uses: warm seconds = fixed_s + work_units / speed, per
instance (card + launch flags) and family. Pure: every function returns a new estimate.

- Seeded by the warm-up (one or two calibration jobs), so a new instance is usable at once.
- Weighted least squares with exponential forgetting (`half_life` jobs), so it follows slow
  changes; with one job size only, the split between fixed and per-unit time keeps the prior's.
- Robust to outliers (a first run's compile and cache warm-up, a stalled socket's huge or
  near-zero duration): in the fit an observation more than `trust` times off the prediction
  counts as `trust` times off, so one moves the estimate little.
- Drift detection: a two-sided CUSUM on log(observed / predicted), each observation counted
  at most `clip` times off, so one outlier never fires it; when it fires (a throttled card, a
  co-tenant: several observations far off the same way), the history is dropped and the
  estimate rescaled to the recent level: the mean ratio of the observations off the same way
  in a row, not the clipped one, so an estimate 8x off (a probe timed cold, a restored card
  that was shared) is right after one shift, however many jobs the policy then sends (it
  used to move at most `clip` times per shift, so what a worker learned depended on how many
  jobs of the family the policy had sent it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Learning:
    half_life: float = 40.0
    """Jobs after which an observation weighs half."""
    clip: float = 3.0
    """The most an observation counts off the prediction for the drift detector."""
    trust: float = 1.5
    """The most an observation counts off the prediction in the fit."""
    prior_weight: float = 2.0
    """How many observations the seed is worth."""
    drift_slack: float = 0.1
    """CUSUM slack in log units (about 10 % off is noise)."""
    drift_limit: float = 1.5
    """CUSUM threshold in log units."""
    rescale_limit: float = 20.0
    """The most an observation counts off the prediction for the level a shift rescales to."""
    small_job: float = 0.25
    """A job of less than this share of the mean work units seen is small: it never fires the
    drift detector (its time is mostly the fixed part)."""
    timing_noise_s: float = 0.02
    """Seconds by which the relay's timing of a job may be off (event-loop jitter, millisecond
    stamps): the drift detector counts only how far a job is off beyond it. Jobs of seconds
    barely notice; jobs of tens of milliseconds (an emulated farm at `--time-scale 0.05`:
    400 four-step jobs posted at once) fired it 11 and 15 times on jitter alone, each shift
    rescaling what the policy believes by up to 3x; at 0.02 s, none in two runs, and a job
    twice as slow as predicted still counts as 1.7x at 60 ms."""


@dataclass(frozen=True)
class SpeedEstimate:
    fixed_s: float
    per_unit_s: float
    weight: float = 0.0
    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_xx: float = 0.0
    sum_xy: float = 0.0
    cusum_up: float = 0.0
    cusum_down: float = 0.0
    observations: int = 0
    shifts: int = 0
    """How often the drift detector fired (a throttled card, a co-tenant): each a new regime."""
    run_log: float = 0.0
    """Sum of log(observed / predicted) over the latest observations off the same way in a row
    (each at most `rescale_limit` times off): the level a shift rescales to."""
    run_count: float = 0.0
    """How many observations `run_log` sums."""
    prior_weight: float = 0.0
    """How much of `weight` is the seed's (decayed as the observations are)."""
    prior_x: float = 0.0
    """The seed's work units (the warm-up's, or the job a shift rescaled at)."""

    @property
    def speed(self) -> float:
        """Work units per second (the `WorkerView.speed` value)."""
        return 1.0 / self.per_unit_s if self.per_unit_s > 0 else math.inf

    def predict_s(self, work_units: float) -> float:
        return self.fixed_s + work_units * self.per_unit_s


def seed(
    work_units: float, seconds: float, fixed_share: float = 0.2, learning: Learning = Learning()
) -> SpeedEstimate:
    """An estimate from one warm-up job: `fixed_share` of its time fixed, the rest per unit."""
    fixed = seconds * fixed_share
    per_unit = (seconds - fixed) / max(work_units, 1e-9)
    return _seeded(SpeedEstimate(fixed, per_unit), work_units, seconds, learning.prior_weight)


MAX_FIXED_SHARE = 0.9
"""The most of a probe's seconds two probe sizes may call fixed (noise on two close times
could call it all fixed, or less than none)."""


def seed_from_probes(
    points: Sequence[tuple[float, float]], learning: Learning = Learning()
) -> SpeedEstimate | None:
    """An estimate from the warm-up's speed probes, (work units, seconds) each, the largest
    first: one seeds with the default split; two give the split too (the line through them:
    what is paid whatever the size is fixed), and the second is then one more observation.
    None without a usable probe."""
    usable = [(units, seconds) for units, seconds in points if units > 0 and seconds > 0]
    if not usable:
        return None
    units, seconds = usable[0]
    if len(usable) == 1 or usable[1][0] >= units:
        return seed(units, seconds, learning=learning)
    small_units, small_s = usable[1]
    per_unit = (seconds - small_s) / (units - small_units)
    share = min(max(1.0 - units * per_unit / seconds, 0.0), MAX_FIXED_SHARE)
    estimate = seed(units, seconds, fixed_share=share, learning=learning)
    return observe(estimate, small_units, small_s, learning)


def _seeded(prior: SpeedEstimate, work_units: float, seconds: float, w: float) -> SpeedEstimate:
    return replace(_add(prior, work_units, seconds, w), prior_weight=w, prior_x=work_units)


def _add(est: SpeedEstimate, x: float, y: float, w: float) -> SpeedEstimate:
    return replace(
        est,
        weight=est.weight + w,
        sum_x=est.sum_x + w * x,
        sum_y=est.sum_y + w * y,
        sum_xx=est.sum_xx + w * x * x,
        sum_xy=est.sum_xy + w * x * y,
    )


def _decayed(est: SpeedEstimate, factor: float) -> SpeedEstimate:
    return replace(
        est,
        weight=est.weight * factor,
        sum_x=est.sum_x * factor,
        sum_y=est.sum_y * factor,
        sum_xx=est.sum_xx * factor,
        sum_xy=est.sum_xy * factor,
        prior_weight=est.prior_weight * factor,
    )


def _fit(est: SpeedEstimate) -> SpeedEstimate:
    """Least squares on the sums; the prior's split between fixed and per-unit time when the
    sizes of the jobs observed barely vary (keeping its slope instead put every change into
    the fixed part: 1.1 s fixed and 44 units/s for jobs of 1.2 s on a real H200, a speed no
    other size fits). The seed's own size does not count as a second size: a warm-up probe of
    10 steps timed right after CUDA's start-up, then 20-step jobs as fast, drew a line through
    the two that was nearly flat (51 units/s and 0.79 s fixed on a real H200, where a job of
    four times the work takes four times as long)."""
    if est.weight <= 0:
        return est
    mean_x, mean_y = est.sum_x / est.weight, est.sum_y / est.weight
    if _sizes_vary(est):
        var_x = est.sum_xx / est.weight - mean_x * mean_x
        slope = (est.sum_xy / est.weight - mean_x * mean_y) / var_x
        if slope > 0 and mean_y - slope * mean_x >= 0:
            return replace(est, per_unit_s=slope, fixed_s=mean_y - slope * mean_x)
        if slope > 0:  # the line crosses below zero: the best line through the origin
            return replace(est, per_unit_s=est.sum_xy / max(est.sum_xx, 1e-12), fixed_s=0.0)
    share = est.fixed_s / max(est.predict_s(mean_x), 1e-9)
    fixed = share * mean_y
    return replace(est, fixed_s=fixed, per_unit_s=(mean_y - fixed) / max(mean_x, 1e-9))


def _sizes_vary(est: SpeedEstimate) -> bool:
    """Whether the observed jobs (the seed left out) span more than one size."""
    weight = est.weight - est.prior_weight
    if weight <= 1e-9 * est.weight:
        return False
    sum_x = est.sum_x - est.prior_weight * est.prior_x
    sum_xx = est.sum_xx - est.prior_weight * est.prior_x * est.prior_x
    mean_x = sum_x / weight
    return sum_xx / weight - mean_x * mean_x > 1e-6 * max(mean_x * mean_x, 1e-9)


def _drifted(est: SpeedEstimate, log_ratio: float, learning: Learning) -> SpeedEstimate:
    up = max(0.0, est.cusum_up + log_ratio - learning.drift_slack)
    down = max(0.0, est.cusum_down - log_ratio - learning.drift_slack)
    return replace(est, cusum_up=up, cusum_down=down)


def observe(
    est: SpeedEstimate, work_units: float, seconds: float, learning: Learning = Learning()
) -> SpeedEstimate:
    """The estimate after one warm job of `work_units` took `seconds` (load excluded): one
    observation moves the prediction by at most a share of `trust` times off."""
    predicted = max(est.predict_s(work_units), 1e-9)
    ratio = _bounded(seconds / predicted, learning.clip)
    if not _small(est, work_units, learning):
        beyond = _beyond_noise(seconds, predicted, learning.timing_noise_s) / predicted
        off = math.log(_bounded(beyond, learning.rescale_limit))
        est = _drifted(
            _in_run(est, off, learning), math.log(_bounded(beyond, learning.clip)), learning
        )
    if max(est.cusum_up, est.cusum_down) > learning.drift_limit:
        est = _new_regime(est, work_units, learning)
        predicted = max(est.predict_s(work_units), 1e-9)
        ratio = seconds / predicted
    factor = 0.5 ** (1.0 / learning.half_life)
    counted_s = predicted * _bounded(ratio, learning.trust)
    fitted = _fit(_add(_decayed(est, factor), work_units, counted_s, 1.0))
    # The run's ratios, as far off as they are from the prediction now (it moved).
    moved = math.log(max(fitted.predict_s(work_units), 1e-9) / predicted)
    run_log = fitted.run_log - fitted.run_count * moved
    return replace(fitted, observations=est.observations + 1, run_log=run_log)


def _in_run(est: SpeedEstimate, log_ratio: float, learning: Learning) -> SpeedEstimate:
    """The run of observations off the same way, with this one (within the slack: no run)."""
    if abs(log_ratio) <= learning.drift_slack:
        return replace(est, run_log=0.0, run_count=0.0)
    if est.run_count and (log_ratio > 0) != (est.run_log > 0):
        return replace(est, run_log=log_ratio, run_count=1.0)
    return replace(est, run_log=est.run_log + log_ratio, run_count=est.run_count + 1.0)


def _new_regime(est: SpeedEstimate, work_units: float, learning: Learning) -> SpeedEstimate:
    """Forget the history, keep the shape, rescale to the run's mean level."""
    level = math.exp(est.run_log / est.run_count) if est.run_count else 1.0
    fresh = SpeedEstimate(est.fixed_s * level, est.per_unit_s * level, shifts=est.shifts + 1)
    return _seeded(fresh, work_units, fresh.predict_s(work_units), learning.prior_weight)


def _beyond_noise(seconds: float, predicted: float, noise_s: float) -> float:
    """`seconds` moved toward `predicted` by the timing noise: what of the gap is measured."""
    if seconds > predicted:
        return max(seconds - noise_s, predicted)
    return min(seconds + noise_s, predicted)


def _small(est: SpeedEstimate, work_units: float, learning: Learning) -> bool:
    """A job far smaller than those seen so far (a 64x64 one-step one is all fixed time): it
    says nothing of the card's pace, so it never fires the drift detector."""
    return est.weight > 0 and work_units < learning.small_job * est.sum_x / est.weight


def _bounded(ratio: float, limit: float) -> float:
    return min(max(ratio, 1.0 / limit), limit)


def views(
    book: Mapping[tuple[str, str], SpeedEstimate], worker: str
) -> tuple[dict[str, float], dict[str, float]]:
    """(`speed`, `fixed_s`) for one worker's `WorkerView`, from a book keyed by (worker, family)."""
    mine = {family: est for (name, family), est in book.items() if name == worker}
    return (
        {family: est.speed for family, est in mine.items()},
        {family: est.fixed_s for family, est in mine.items()},
    )
