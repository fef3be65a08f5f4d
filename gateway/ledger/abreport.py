"""The report of an A/B experiment: per group the stats of the total and of each phase, cold
and warm apart; per group against the baseline (the experiment's first group) the ratio of
each measure with intervals and tests; and a verdict in one line.

The comparisons use warm jobs (cold ones mix in load and first-use costs that the launch
flags under test do not change), all jobs where a group has too few warm ones. A phase that
some job of either group spent no time in (encode with its texts cached, load when warm) is
not compared. Times are held within a factor `SPREAD` of the pooled median before the test
(`winsorized`: events delivered in a burst make a node look instant). The verdict rests on
the sequential test alone (`gateway.ledger.abstats`), at level `ALPHA` over everything it
says: alpha is divided between the groups compared with the baseline, then half of it goes
to the total and half, split evenly, to the phases (Bonferroni), so reading the report after
every job does not manufacture winners.

Pure: ledgers in, a JSON-able dict out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.ledger import abstats, aggregate
from gateway.ledger.experiments import Experiment
from gateway.ledger.record import PHASES

Ledger = Mapping[str, Any]
ALPHA = abstats.ALPHA
SPREAD = 4.0
"""Values are held within this factor of the pooled median for the test (`winsorized`)."""
TOTAL = "exec_s"
"""The measure a verdict is first about: the job's execution, dispatch to end."""


def members(experiment: Experiment, ledgers: Sequence[Ledger]) -> list[Ledger]:
    """The experiment's usable ledgers, oldest first (arrival order)."""
    mine = [x for x in aggregate.usable(ledgers) if x.get("experiment") == experiment.name]
    return sorted(mine, key=lambda x: x.get("finished_at_ms") or 0)


def report(
    experiment: Experiment, ledgers: Sequence[Ledger], *, jobs: bool = False
) -> dict[str, Any]:
    """The whole report of `experiment` from the farm's latest ledgers (`jobs`: with each
    job's group, temperature and seconds per measure)."""
    mine = members(experiment, ledgers)
    by_group = {g: [x for x in mine if x.get("group") == g] for g in experiment.groups}
    baseline = experiment.groups[0]
    comparisons = [
        compare(mine, baseline, group, _pair_alpha(experiment), descriptive=True)
        for group in experiment.groups[1:]
    ]
    body = {
        "experiment": experiment.model_dump(mode="json"),
        "jobs": len(mine),
        "groups": {
            group: {
                "n": len(part),
                **{
                    t: aggregate.summary([x for x in part if aggregate.temperature(x) == t])
                    for t in ("cold", "warm")
                },
            }
            for group, part in by_group.items()
        },
        "comparisons": comparisons,
        "verdict": " ".join(c["verdict"] for c in comparisons),
    }
    if jobs:
        body["job_times"] = [_times(x) for x in mine]
    return body


def _times(ledger: Ledger) -> dict[str, Any]:
    seconds = {name: aggregate.measure(ledger, name) for name in (TOTAL, *PHASES)}
    return {
        "job_id": ledger.get("job_id"),
        "group": ledger.get("group"),
        "cold": bool(ledger.get("cold")),
        **seconds,
    }


def _pair_alpha(experiment: Experiment) -> float:
    return ALPHA / (len(experiment.groups) - 1)


def compared(jobs: Sequence[Ledger], group: str) -> list[Ledger]:
    """The group's jobs a comparison uses: warm ones, or all with too few warm ones."""
    mine = [x for x in jobs if x.get("group") == group]
    warm = [x for x in mine if not x.get("cold")]
    return warm if len(warm) >= abstats.MIN_JOBS else mine


def compare(
    jobs: Sequence[Ledger],
    baseline: str,
    group: str,
    alpha: float = ALPHA,
    *,
    descriptive: bool = False,
) -> dict[str, Any]:
    """`group` against `baseline` over `jobs` (in arrival order): per measure the sequential
    test (and, `descriptive`, bootstrap intervals and the rank test), and the verdict."""
    a = compared(jobs, baseline)
    b = compared(jobs, group)
    ids = {id(x): "a" for x in a} | {id(x): "b" for x in b}
    order = [ids[id(x)] for x in jobs if id(x) in ids]
    measures = {}
    for name, level in _levels(alpha):
        values_a = _values(a, name)
        values_b = _values(b, name)
        if values_a is None or values_b is None:
            continue
        measures[name] = _measure(values_a, values_b, order, level, descriptive)
    return {
        "baseline": baseline,
        "group": group,
        "n": {baseline: len(a), group: len(b)},
        "measures": measures,
        "verdict": verdict(baseline, group, measures, len(a) + len(b)),
    }


def _levels(alpha: float) -> list[tuple[str, float]]:
    """Each measure with its share of alpha: half to the total, half split over the phases."""
    return [(TOTAL, alpha / 2), *((p, alpha / 2 / len(PHASES)) for p in PHASES)]


def _values(jobs: Sequence[Ledger], name: str) -> list[float] | None:
    """The measure's seconds, or None when some job spent no time in it."""
    values = [aggregate.measure(x, name) for x in jobs]
    kept = [v for v in values if v is not None and v > 0]
    return kept if kept and len(kept) == len(values) else None


def winsorized(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float]]:
    """Both groups' values held within `SPREAD` times the pooled median either way: a node
    whose events reached the gateway in a burst (a busy event loop) reads as taking nearly
    nothing, and one log-time near zero would swamp the test. The same bounds for both
    groups, so identical groups stay identical."""
    pooled = statistics.median([*a, *b])
    low, high = pooled / SPREAD, pooled * SPREAD
    return [min(max(v, low), high) for v in a], [min(max(v, low), high) for v in b]


def _measure(
    a: Sequence[float], b: Sequence[float], order: Sequence[str], alpha: float, full: bool
) -> dict[str, Any]:
    test = abstats.sequential(*winsorized(a, b), alpha=alpha, order=order)
    assert test is not None  # both groups have values
    low, high = test.interval
    out: dict[str, Any] = {
        "median_s": [round(statistics.median(a), 6), round(statistics.median(b), 6)],
        "ratio": round(test.ratio, 4),
        "interval": [round(low, 4), round(high, 4)],
        "p_value": round(test.p_value, 6),
        "alpha": alpha,
        "decided": test.decided,
        "jobs_to_decide": test.jobs_to_decide(),
    }
    if full:
        means = abstats.bootstrap_ratio(a, b)
        medians = abstats.bootstrap_ratio(a, b, statistics.median)
        out["bootstrap_mean_ratio"] = None if means is None else [round(v, 4) for v in means]
        out["bootstrap_median_ratio"] = None if medians is None else [round(v, 4) for v in medians]
        out["mann_whitney_p"] = abstats.mann_whitney(a, b)
    return out


def verdict(baseline: str, group: str, measures: Mapping[str, Any], jobs: int) -> str:
    """One line: which group is faster, in which phase, by how much, or what cannot be told."""
    total = measures.get(TOTAL)
    phases = {p: m for p, m in measures.items() if p != TOTAL}
    decided = {p: m for p, m in phases.items() if m["decided"]}
    lead = _lead(decided or phases)
    if total is not None and total["decided"]:
        faster, slower, factor = _order(baseline, group, total["ratio"])
        where = f", mostly in {lead}" if lead in decided else ""
        return (
            f"{faster} is faster than {slower} by {_percent(factor)} "
            f"(execution {total['ratio']:.3f}x, interval {_interval(total)}){where}, "
            f"after {jobs} jobs."
        )
    if lead is not None and lead in decided:
        m = decided[lead]
        faster, slower, factor = _order(baseline, group, m["ratio"])
        return (
            f"{faster} is faster than {slower} in {lead} by {_percent(factor)} "
            f"({m['ratio']:.3f}x, interval {_interval(m)}); the total cannot tell yet, "
            f"after {jobs} jobs."
        )
    return _undecided(baseline, group, total, jobs)


def _undecided(baseline: str, group: str, total: Mapping[str, Any] | None, jobs: int) -> str:
    if total is None:
        return f"{group} against {baseline}: cannot tell yet, too few timed jobs ({jobs})."
    more = total["jobs_to_decide"]
    tail = (
        f"about {more} more jobs would tell a difference of this size"
        if more is not None
        else "no difference seen"
    )
    return (
        f"{group} against {baseline}: cannot tell yet after {jobs} jobs (execution "
        f"{total['ratio']:.3f}x, interval {_interval(total)}); {tail}."
    )


def _lead(measures: Mapping[str, Any]) -> str | None:
    """The phase where the two groups' medians differ by the most seconds."""
    if not measures:
        return None
    return max(measures, key=lambda p: abs(measures[p]["median_s"][1] - measures[p]["median_s"][0]))


def _order(baseline: str, group: str, ratio: float) -> tuple[str, str, float]:
    """(faster, slower, how many times faster) from the ratio group / baseline."""
    return (group, baseline, 1 / ratio) if ratio < 1 else (baseline, group, ratio)


def _percent(factor: float) -> str:
    """How much less time the faster group takes, as a share of the slower one's."""
    return f"{(1 - 1 / factor) * 100:.0f} %"


def _interval(m: Mapping[str, Any]) -> str:
    low, high = m["interval"]
    return f"{low:.3f}-{high:.3f}"
