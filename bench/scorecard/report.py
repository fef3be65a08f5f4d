"""The scorecard as Markdown (the failing cells first, then a table per metric) and as a plot of
ours / best baseline per cell."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from bench import ratio_plot
from bench.scorecard.goals import (
    FLOOR,
    LOADS,
    LOADS_SLACK,
    MAKESPAN,
    METRICS,
    SWARM_FACTOR,
    Judged,
    Metric,
    Score,
)
from bench.sim.report import fmt, table


def failing_section(judged: Sequence[Judged]) -> str:
    failing = [j for j in judged if not j.ok]
    head = f"## Failing cells: {len(failing)} of {len(judged)}\n\n"
    if not failing:
        return head + "Every cell meets every goal."
    body = [[j.cell.label, "; ".join(j.failures)] for j in failing]
    return head + table(("cell", "goals missed"), body)


def _misses(score: Score, judged: Judged) -> bool:
    if score.metric == LOADS:
        return not score.ours <= score.best + LOADS_SLACK
    target = judged.swarm_target
    swarm_missed = judged.swarm_goal == score.metric and not score.swarm_ratio >= target
    return not score.ratio >= FLOOR or swarm_missed


def _goal(score: Score, judged: Judged) -> str:
    if score.metric == LOADS:
        return f"<= reference + {LOADS_SLACK:g}"
    wanted = f">= {FLOOR}"
    if judged.swarm_goal == score.metric:
        capped = " (bound)" if judged.swarm_target < SWARM_FACTOR else ""
        wanted += f", >= {judged.swarm_target:.3g}{capped} swarm_like"
    return wanted


def metric_section(metric: Metric, judged: Sequence[Judged]) -> str:
    digits = 3 if metric.key == "goodput_per_s" else 1
    scored = [(j, s) for j in judged for s in (*j.scores, j.loads) if s.metric == metric]
    scored.sort(key=lambda js: not _misses(js[1], js[0]))
    best = "reference baseline" if metric == LOADS else "best baseline"
    header = ["cell", "ours", best, "ours / best", "swarm_like", "ours / swarm"]
    if metric == LOADS:
        header.append("fewest loads of any baseline")
    if metric == MAKESPAN:
        header += ["batch lower bound", "swarm_like / bound", "offline planner", "swarm / planner"]
    body = []
    for j, s in scored:
        row = [
            ("**missed** " if _misses(s, j) else "") + j.cell.label,
            fmt(s.ours, digits),
            f"{s.best_policy} {fmt(s.best, digits)}",
            fmt(s.ratio, 3),
            fmt(s.swarm, digits),
            fmt(s.swarm_ratio, 3),
        ]
        if metric == LOADS:
            row.append(f"{j.thriftiest[0]} {fmt(j.thriftiest[1], digits)}")
        if metric == MAKESPAN:
            row += [fmt(j.bound_s, digits), fmt(s.swarm / j.bound_s, 3)]
            row += [fmt(j.planner_s, digits), fmt(s.swarm / j.planner_s, 3)]
        body.append([*row, _goal(s, j)])
    direction = "lower is better" if metric.lower_better else "higher is better"
    return f"## {metric.label} ({direction})\n\n" + table([*header, "goal"], body)


NOTES = (
    "Ratios are ours relative to the other policy with lower-is-better metrics inverted, so "
    ">= 1 means ours is at least as good: best / ours for latency and makespan, ours / best for "
    "goodput. Values are means over the seeds. Makespan: the mean over rounds of jobs released "
    "together (one batch, each round of a burst) from their release to the last one's finish. "
    "Goodput: jobs finished within 2 x their warm time on the fastest card + 10 s, per second.",
    "Cells: `shape farm-kind+workers cache K=`. Shapes: sequential (one client, each job a think "
    "time of 0-5 s after the previous finished), burstB (rounds of B jobs at once, each a think "
    "time after the previous round finished, so on an idle farm), batchN (N jobs at once), "
    "poissonL (Poisson arrivals at L % of the capacity bound), session (users iterating on one "
    "model, 80 %). Farms: uniform = h200s, mixed = half h200 and half rtx4070ti, flags = h200s, "
    "half with `--cache-lru 8`; lru = `--cache-lru 8` on every worker; gateway = each card as "
    "the gateway launches it with no cache flag given (`--cache-lru 22` on an H200, keeping four "
    "checkpoints; the classic cache on an RTX 4070 Ti).",
)


GOALS = (
    "How the goals are read. Every cell: ours >= {floor}x the best baseline on latency, "
    "makespan and goodput. Mixed farms (fast and slow cards, or one card with different "
    "flags) at >= 50 % load or with batches of >= 100 jobs: ours >= {swarm}x swarm_like on the "
    "cell's headline metric (mean latency under load, makespan for a batch), except where the "
    "batch's lower bound makes that impossible: no schedule beats swarm_like by more than "
    "swarm_like / bound, so there the goal is {floor} x swarm_like / bound (ours within "
    "{floor_pct:g} % of the bound), marked `(bound)`. Loads: ours at most the reference "
    "baseline's loads per 100 jobs + {slack:g}, the reference being the thriftiest baseline "
    "among those within {floor}x of the best baseline on the headline metric (mean latency; "
    "makespan for a batch). A baseline that saves loads by serving more than {floor_pct:g} % "
    "worse than the best is a schedule the first goal forbids ours to be, so it does not set "
    "the bar; the loads table shows the thriftiest baseline of all beside the reference "
    "(often affinity_only or swarm_like, which queue behind a holder instead of loading). "
    "The makespan table also shows, for batches of up to 500 jobs, the offline planner "
    "(`bench.sim.bounds.plan_batch`: the whole batch and every true cost known in advance, an "
    "annealed search over which card runs which jobs): no bound, but where swarm_like / planner "
    "is below the swarm_like goal, even that schedule would miss it."
)


def goals_note() -> str:
    return GOALS.format(
        floor=FLOOR, swarm=SWARM_FACTOR, slack=LOADS_SLACK, floor_pct=round((1 - FLOOR) * 100)
    )


def notes() -> list[str]:
    return [n.format(floor=FLOOR, swarm=SWARM_FACTOR, slack=LOADS_SLACK) for n in NOTES]


def markdown(judged: Sequence[Judged], header_lines: Sequence[str]) -> str:
    sections = [
        "# Scorecard: ours (`affinity`) against every baseline",
        "\n\n".join(header_lines),
        goals_note(),
        failing_section(judged),
        *(metric_section(m, judged) for m in (*METRICS, LOADS)),
        *notes(),
    ]
    return "\n\n".join(sections) + "\n"


LOW, HIGH = 0.5, 2.0
"""The plot's range of ratios; values outside are drawn at its edges."""


def plot(judged: Sequence[Judged], path: Path, command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.22 * len(judged)))
    for offset, metric in zip((-0.24, -0.08, 0.08, 0.24), METRICS, strict=True):
        points = [
            (i + offset, _clip(s.ratio))
            for i, j in enumerate(judged)
            if (s := j.of(metric)) is not None
        ]
        if points:
            ys, xs = zip(*points, strict=True)
            ax.scatter(xs, ys, s=14, label=metric.label)
    ax.axvline(FLOOR, color="red", linewidth=1, label=f"goal {FLOOR}")
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(LOW * 0.97, HIGH * 1.03)
    ticks = (0.5, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(len(judged)), [j.cell.label for j in judged], fontsize=6)
    for label, j in zip(ax.get_yticklabels(), judged, strict=True):
        label.set_color("black" if j.ok else "firebrick")
    ax.invert_yaxis()
    xlabel = (
        f"ours / best baseline (>= 1: ours at least as good; clipped to {LOW}-{HIGH}); "
        "a cell in red misses a goal"
    )
    ratio_plot.finish(fig, ax, path, command, xlabel, columns=5)


def _clip(value: float) -> float:
    if math.isnan(value):
        return LOW
    return min(max(value, LOW), HIGH)
