"""PNG plots of job times per group and phase. matplotlib is an optional dependency (in the
`dev` extra): imported only here, when a plot is asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.ledger.record import PHASES

MEASURES = ("exec_s", *PHASES)


class NoPlotting(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise NoPlotting(
            "the plot needs matplotlib, which is not installed: pip install matplotlib "
            "(or the project's dev extra)"
        ) from None
    return plt


def phase_boxes(
    title: str, job_times: Sequence[Mapping[str, Any]], groups: Sequence[str], out: Path
) -> Path:
    """Box plots of each measure's seconds, one box per group, warm jobs (all jobs of a group
    without warm ones), one panel per measure that any job spent time in."""
    plt = _pyplot()
    measures = [m for m in MEASURES if any((t.get(m) or 0) > 0 for t in job_times)]
    figure, axes = plt.subplots(1, max(len(measures), 1), figsize=(2.6 * len(measures) + 1, 3.8))
    axes = axes if len(measures) > 1 else [axes]
    for axis, measure in zip(axes, measures, strict=False):
        data = [_seconds(job_times, group, measure) for group in groups]
        axis.boxplot(data, tick_labels=list(groups), showfliers=True)
        axis.set_title("execution" if measure == "exec_s" else measure)
        axis.set_ylabel("seconds")
        axis.tick_params(axis="x", labelrotation=20)
    figure.suptitle(title)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out


def _seconds(job_times: Sequence[Mapping[str, Any]], group: str, measure: str) -> list[float]:
    mine = [t for t in job_times if t.get("group") == group]
    warm = [t for t in mine if not t.get("cold")] or mine
    return [float(t[measure]) for t in warm if t.get(measure) is not None]


def effect_bars(title: str, rows: Sequence[tuple[str, float, float, float]], out: Path) -> Path:
    """One horizontal bar per (label, ratio, low, high): a ratio against the baseline with
    its interval; 1 is no effect."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.5))
    labels = [row[0] for row in rows]
    ratios = [row[1] for row in rows]
    errors = [[r - low for _, r, low, _ in rows], [high - r for _, r, _, high in rows]]
    axis.barh(labels, [r - 1 for r in ratios], left=1, xerr=errors, color="tab:blue", alpha=0.7)
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xlabel("time with the flag / baseline (lower is faster)")
    axis.invert_yaxis()
    figure.suptitle(title)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
