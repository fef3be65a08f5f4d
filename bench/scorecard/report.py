"""The scorecard as Markdown (the failing cells first, then a table per metric) and as a plot of
ours / best baseline per cell."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

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
    swarm_missed = judged.swarm_goal == score.metric and not score.swarm_ratio >= SWARM_FACTOR
    return not score.ratio >= FLOOR or swarm_missed


def _goal(score: Score, judged: Judged) -> str:
    if score.metric == LOADS:
        return f"<= best + {LOADS_SLACK:g}"
    wanted = f">= {FLOOR}"
    if judged.swarm_goal == score.metric:
        wanted += f", >= {SWARM_FACTOR} swarm_like"
    return wanted


def metric_section(metric: Metric, judged: Sequence[Judged]) -> str:
    digits = 3 if metric.key == "goodput_per_s" else 1
    scored = [(j, s) for j in judged for s in (*j.scores, j.loads) if s.metric == metric]
    scored.sort(key=lambda js: not _misses(js[1], js[0]))
    header = ["cell", "ours", "best baseline", "ours / best", "swarm_like", "ours / swarm"]
    if metric == LOADS:
        header.append("baseline best on mean latency")
    if metric == MAKESPAN:
        header += ["batch lower bound", "swarm_like / bound"]
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
            row.append(f"{j.fastest[0]} {fmt(j.fastest[1], digits)}")
        if metric == MAKESPAN:
            row += [fmt(j.bound_s, digits), fmt(s.swarm / j.bound_s, 3)]
        body.append([*row, _goal(s, j)])
    direction = "lower is better" if metric.lower_better else "higher is better"
    return f"## {metric.label} ({direction})\n\n" + table([*header, "goal"], body)


NOTES = (
    "Ratios are ours relative to the other policy with lower-is-better metrics inverted, so "
    ">= 1 means ours is at least as good: best / ours for latency and makespan, ours / best for "
    "goodput. Values are means over the seeds. Makespan: the mean over rounds of jobs released "
    "together (one batch, each round of a burst) from their release to the last one's finish. "
    "Goodput: jobs finished within 2 x their warm time on the fastest card + 10 s, per second.",
    "Goals: every cell >= {floor} on latency, makespan and goodput; on mixed farms (fast and "
    "slow cards, or one card with different flags) at >= 50 % load or with batches of >= 100 "
    "jobs >= {swarm}x swarm_like on the cell's headline metric (mean latency under load, "
    "makespan for a batch); loads per 100 jobs at most the best baseline's + {slack:g}. Where "
    "swarm_like / bound (makespan table) is under {swarm}, no schedule can beat swarm_like by "
    "{swarm}x on that batch. The loads table also names the baseline best on mean latency: the "
    "one with the fewest loads may never load and queue instead (affinity_only, or swarm_like "
    "where every checkpoint is held somewhere).",
    "Cells: `shape farm-kind+workers cache K=`. Shapes: sequential (one client, each job a think "
    "time of 0-5 s after the previous finished), burstB (rounds of B jobs at once, each a think "
    "time after the previous round finished, so on an idle farm), batchN (N jobs at once), "
    "poissonL (Poisson arrivals at L % of the capacity bound), session (users iterating on one "
    "model, 80 %). Farms: uniform = h200s, mixed = half h200 and half rtx4070ti, flags = h200s, "
    "half with `--cache-lru 8`; lru = `--cache-lru 8` on every worker.",
)


def notes() -> list[str]:
    return [n.format(floor=FLOOR, swarm=SWARM_FACTOR, slack=LOADS_SLACK) for n in NOTES]


def markdown(judged: Sequence[Judged], header_lines: Sequence[str]) -> str:
    sections = [
        "# Scorecard: ours (`affinity`) against every baseline",
        "\n\n".join(header_lines),
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
    ax.set_xlabel(
        f"ours / best baseline (>= 1: ours at least as good; clipped to {LOW}-{HIGH}); "
        "a cell in red misses a goal",
        fontsize=8,
    )
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False)
    fig.text(0.01, 0.002, command, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.01, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _clip(value: float) -> float:
    if math.isnan(value):
        return LOW
    return min(max(value, LOW), HIGH)
