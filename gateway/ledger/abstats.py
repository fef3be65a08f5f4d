"""Statistics for comparing the job times of two groups: descriptive intervals, a rank test,
and a sequential test whose verdict stays valid however often it is read.

- `bootstrap_ratio`: a percentile bootstrap 95 % interval of mean(b) / mean(a) (or of the
  medians), resampling each group on its own. Descriptive: read after every job, such an
  interval excludes 1 by chance far more often than 5 % of the time.
- `mann_whitney`: the two-sided Mann-Whitney U test (normal approximation with the tie
  correction and a continuity correction; fine from about 8 jobs per group). Also a
  fixed-sample test, shown for reference.
- `sequential`: the verdict. A mixture sequential probability ratio test (mSPRT; Robbins
  1970, as in Johari et al., "Always valid inference", 2017) on the difference of the mean
  log-times, d = mean(log b) - mean(log a), so that a ratio of geometric means exp(d) is what
  it estimates and multiplicative noise is what it expects. With V = var(log a)/n_a +
  var(log b)/n_b (Welch's plug-in variance of the estimate) and a normal mixing distribution
  of the effect with standard deviation `TAU` (log scale, about 20 %), the likelihood ratio of
  "some difference" against "none" is

      L = sqrt(V / (V + TAU^2)) * exp(d^2 TAU^2 / (2 V (V + TAU^2)))

  which, under no difference, is a (approximately, with the plug-in variance) nonnegative
  martingale in the jobs' arrival order: by Ville's inequality the chance that it *ever*
  reaches 1/alpha is at most alpha, so the always-valid p-value `1 / max L` (the maximum over
  every prefix of the data, in arrival order) may be read after every job. Inverting the same
  boundary gives the confidence sequence of d: `d +- sqrt(2 V (V + TAU^2) / TAU^2 *
  log(sqrt((V + TAU^2) / V) / alpha))`, an interval valid at all times at once. Before
  `MIN_JOBS` per group the plug-in variance is too rough and the test abstains. The repeated
  runs check is `tests/unit/gateway/ledger/test_abstats.py`: identical groups, read after
  every job, are called different in well under 5 % of runs.

Several measures (the total and each phase) are tested at once: the report (`gateway.ledger.
abreport`) spends half of alpha on the total and splits the other half evenly over the phases
(Bonferroni), so the chance that any of its verdicts is a false one stays at most alpha.

Pure Python: no dependency beyond the standard library.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ALPHA = 0.05
TAU = 0.2
"""Standard deviation of the mixing distribution of the log-ratio: the test is most sensitive
to effects of about this size (20 %)."""
MIN_JOBS = 10
"""Jobs per group before the sequential test may decide: with 5, identical groups read after
every job were called different in 5 % of runs (the plug-in variance of a handful of jobs is
too rough); with 10, in 1.3 % (300 runs of 120 jobs, `test_abstats.py`)."""
RESAMPLES = 1000


def bootstrap_ratio(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = statistics.fmean,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """A 95 % percentile bootstrap interval of statistic(b) / statistic(a); None with fewer
    than two values in a group or a zero statistic."""
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        base = statistic(rng.choices(a, k=len(a)))
        if base > 0:
            ratios.append(statistic(rng.choices(b, k=len(b))) / base)
    if len(ratios) < resamples // 2:
        return None
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The two-sided p-value of the Mann-Whitney U test of a against b (None: a group is
    empty, or every value is the same)."""
    n_a, n_b = len(a), len(b)
    if not n_a or not n_b:
        return None
    ranks = _ranks([*a, *b])
    u = sum(ranks[:n_a]) - n_a * (n_a + 1) / 2
    mean = n_a * n_b / 2
    n = n_a + n_b
    ties = sum(t**3 - t for t in _tie_sizes([*a, *b]))
    variance = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return None
    z = max(abs(u - mean) - 0.5, 0.0) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2))


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _tie_sizes(values: Sequence[float]) -> list[int]:
    counts: dict[float, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return [c for c in counts.values() if c > 1]


@dataclass(frozen=True)
class Sequential:
    """The mSPRT on the log-times of two groups, after their jobs so far."""

    log_ratio: float
    """d: mean log-time of b less that of a (negative: b is faster)."""
    variance: float
    """V: the variance of d (Welch's plug-in)."""
    p_value: float
    """Always-valid p-value: 1 / the largest likelihood ratio over every prefix of the data."""
    alpha: float
    n_a: int
    n_b: int

    @property
    def ratio(self) -> float:
        """Ratio of geometric means, b / a."""
        return math.exp(self.log_ratio)

    @property
    def interval(self) -> tuple[float, float]:
        """The confidence sequence of the ratio b / a at this point (valid at all times)."""
        half = _half_width(self.variance, self.alpha) if self.variance > 0 else math.inf
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    @property
    def decided(self) -> bool:
        return self.p_value <= self.alpha

    def jobs_to_decide(self) -> int | None:
        """Roughly how many more jobs (both groups together) until the interval, at today's
        spread, would exclude no difference if the log-ratio stayed what it is; None when
        decided, or when no difference is seen at all (then it may never)."""
        if self.decided or abs(self.log_ratio) < 1e-9 or self.variance <= 0:
            return None
        n = self.n_a + self.n_b
        more = max(n // 10, 1)
        while more < 1000 * n:
            if _half_width(self.variance * n / (n + more), self.alpha) < abs(self.log_ratio):
                return more
            more += max(more // 5, 1)
        return None


def sequential(
    a: Sequence[float], b: Sequence[float], *, alpha: float = ALPHA, order: Sequence[str] = ()
) -> Sequential | None:
    """The sequential test of b's times against a's (seconds, > 0). `order` gives the group
    ("a" or "b") of each job in arrival order, for the running maximum of the likelihood
    ratio; without it, a's and b's jobs are taken as interleaved. None: a group has no job."""
    if not a or not b:
        return None
    if len(order) != len(a) + len(b):
        order = _interleaved(len(a), len(b))
    sums = {"a": _Running(), "b": _Running()}
    values = {"a": iter(a), "b": iter(b)}
    best = 0.0
    for group in order:
        sums[group].add(math.log(max(next(values[group]), 1e-9)))
        if sums["a"].n >= MIN_JOBS and sums["b"].n >= MIN_JOBS:
            best = max(best, _log_lr(sums["a"], sums["b"]))
    first, second = sums["a"], sums["b"]
    d = second.mean - first.mean
    v = first.var / first.n + second.var / second.n
    p_value = min(1.0, math.exp(-best))
    return Sequential(d, v, p_value, alpha, first.n, second.n)


class _Running:
    """Count, mean and variance of a growing list of values (Welford)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (value - self.mean)

    @property
    def var(self) -> float:
        return self._m2 / (self.n - 1) if self.n > 1 else 0.0


def _interleaved(n_a: int, n_b: int) -> list[str]:
    """a and b alternating at their rates."""
    tagged = [(i / n_a, "a") for i in range(n_a)] + [(i / n_b, "b") for i in range(n_b)]
    return [group for _, group in sorted(tagged)]


def _log_lr(a: _Running, b: _Running) -> float:
    """log L of the mixture likelihood ratio."""
    v = a.var / a.n + b.var / b.n
    if v <= 0:
        return 0.0
    d = b.mean - a.mean
    t2 = TAU * TAU
    return 0.5 * math.log(v / (v + t2)) + d * d * t2 / (2 * v * (v + t2))


def _half_width(v: float, alpha: float) -> float:
    t2 = TAU * TAU
    return math.sqrt(2 * v * (v + t2) / t2 * math.log(math.sqrt((v + t2) / v) / alpha))
