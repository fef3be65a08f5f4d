"""Markdown tables and PNG plots of simulator rows, each file headed by the command that made it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from bench.sim.experiments import Row

RESULTS = Path(__file__).resolve().parents[1] / "results"
OURS = "affinity"


def mean(rows: Iterable[Row], key: str) -> float:
    values = [float(r[key]) for r in rows]  # type: ignore[arg-type]
    return float(np.mean(values)) if values else float("nan")


def by(rows: Iterable[Row], *keys: str) -> dict[tuple[object, ...], list[Row]]:
    out: dict[tuple[object, ...], list[Row]] = defaultdict(list)
    for row in rows:
        out[tuple(row[k] for k in keys)].append(row)
    return dict(out)


def fmt(value: float, digits: int = 1) -> str:
    if np.isnan(value):
        return "-"
    if np.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def table(header: Sequence[str], body: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def stable_cell(rows: Sequence[Row]) -> str:
    return f"{sum(bool(r['stable']) for r in rows)}/{len(rows)}"


SUMMARY_HEADER = (
    "policy",
    "stable",
    "p50 s",
    "p95 s",
    "p99 s",
    "good %",
    "goodput /s",
    "loads/100",
    "run %",
    "load %",
    "idle %",
)


def summary_row(policy: str, rows: Sequence[Row]) -> list[str]:
    return [
        f"**{policy}**" if policy == OURS else policy,
        stable_cell(rows),
        fmt(mean(rows, "p50_s")),
        fmt(mean(rows, "p95_s")),
        fmt(mean(rows, "p99_s")),
        fmt(100 * mean(rows, "good_fraction")),
        fmt(mean(rows, "goodput_per_s"), 3),
        fmt(mean(rows, "loads_per_100")),
        fmt(100 * mean(rows, "run_fraction")),
        fmt(100 * mean(rows, "load_fraction")),
        fmt(100 * mean(rows, "idle_fraction")),
    ]


def summary_table(rows: Sequence[Row], order: Sequence[str]) -> str:
    groups = by(rows, "policy")
    body = [summary_row(p, groups[(p,)]) for p in order if (p,) in groups]
    return table(SUMMARY_HEADER, body)


def write(name: str, command: str, title: str, sections: Sequence[str]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    text = f"# {title}\n\nMade by `{command}`.\n\n" + "\n\n".join(sections) + "\n"
    path.write_text(text)
    return path


def line_plot(
    rows: Sequence[Row],
    metric: Callable[[Sequence[Row]], float],
    ylabel: str,
    path: Path,
    command: str,
    log: bool = False,
    title: str = "",
) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.set_title(title, fontsize=10)
    for (policy,), prow in sorted(by(rows, "policy").items(), key=lambda kv: str(kv[0])):
        points = sorted((float(str(load)), metric(r)) for (load,), r in by(prow, "load").items())
        xs, ys = zip(*points, strict=True)
        style = {"linewidth": 3, "color": "black"} if policy == OURS else {"linewidth": 1.3}
        ax.plot(xs, ys, marker="o", label=str(policy), **style)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("offered load (fraction of the all-warm capacity bound)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.01, 0.005, command, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def split_plot(
    rows: Sequence[Row], order: Sequence[str], path: Path, command: str, title: str
) -> None:
    groups = by(rows, "policy")
    names = [p for p in order if (p,) in groups]
    parts = [("run_fraction", "run"), ("load_fraction", "load"), ("idle_fraction", "idle")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bottom = np.zeros(len(names))
    for key, label in parts:
        values = np.array([100 * mean(groups[(p,)], key) for p in names])
        ax.bar(names, values, bottom=bottom, label=label)
        bottom += values
    ax.set_ylabel("% of GPU time")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    ax.legend()
    fig.text(0.01, 0.005, command, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
