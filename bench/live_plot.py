"""A plot of what `bench.live` measured: ours / the best baseline per cell, live and simulated.

`bench.live --out FILE.md` writes its tables; this reads them back (they are the committed
record) and draws, for every case and measure, ours (`affinity`) against the best baseline
of that cell, as the scorecard does: latencies and makespans inverted (best baseline / ours),
goodput as is, so >= 1 means ours is at least as good. Live and simulated sit side by side,
so the plot shows both goals of the live check at once: ours ahead live, and live where the
simulator put it. Loads are left out: their goal is a difference, not a ratio (the tables keep
them). A baseline that did not finish every job (round_robin's budget under open arrivals)
is not comparable and is left out of its case.

    python -m bench.live_plot bench/results/live.md bench/results/live_quickstart.md \
        --out bench/results/live.png
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import ratio_plot

OURS = "affinity"
HIGHER_IS_BETTER = ("goodput/s",)
SKIPPED = ("loads/100",)


@dataclass(frozen=True)
class Row:
    policy: str
    finished: bool
    values: dict[str, tuple[float, float]]
    """measure -> (live, simulated)."""


@dataclass(frozen=True)
class Cell:
    case: str
    measure: str
    baseline: str
    """The best baseline live and simulated (`live / sim`), one name where they agree."""
    live: float
    sim: float
    """ours / the best baseline (inverted for lower-is-better measures), live and simulated."""


def parse(text: str) -> dict[str, list[Row]]:
    """The tables of one `bench.live` report, by case (its `## name` heading)."""
    cases: dict[str, list[Row]] = {}
    case = None
    head: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            case, head = line[3:].strip(), []
            cases[case] = []
        elif case is not None and line.startswith("| policy"):
            head = _cells(line)
        elif case is not None and head and line.startswith("| ") and not line.startswith("| -"):
            cases[case].append(_row(head, _cells(line)))
    return cases


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _row(head: list[str], cells: list[str]) -> Row:
    if len(cells) != len(head):
        raise ValueError(f"a row of {len(cells)} cells under a head of {len(head)}: {cells}")
    by = dict(zip(head, cells, strict=True))
    done = [int(a) == int(b) for a, b in re.findall(r"(\d+)/(\d+)", by["finished (live/sim)"])]
    measures = [h.removesuffix(" live") for h in head if h.endswith(" live")]
    values = {m: (float(by[f"{m} live"]), float(by[f"{m} sim"])) for m in measures}
    return Row(by["policy"], all(done), values)


def judge(cases: dict[str, list[Row]]) -> list[Cell]:
    """Ours against the best comparable baseline, per case and measure."""
    cells = []
    for case, rows in cases.items():
        ours = next((r for r in rows if r.policy == OURS), None)
        others = [r for r in rows if r.policy != OURS and r.finished]
        if ours is None or not others:
            continue
        for measure, (live, sim) in ours.values.items():
            if measure in SKIPPED:
                continue
            higher = measure in HIGHER_IS_BETTER
            sign = -1.0 if higher else 1.0
            best = [min(others, key=lambda r: sign * r.values[measure][side]) for side in (0, 1)]
            names = {b.policy for b in best}
            baseline = best[0].policy if len(names) == 1 else f"{best[0].policy} / {best[1].policy}"
            b_live, b_sim = best[0].values[measure][0], best[1].values[measure][1]
            ratio = (live / b_live, sim / b_sim) if higher else (b_live / live, b_sim / sim)
            cells.append(Cell(case, measure, baseline, *ratio))
    return cells


def plot(cells: Sequence[Cell], path: Path, command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.26 * len(cells)))
    ys = range(len(cells))
    for shift, side, label in ((-0.2, "live", "live"), (0.2, "sim", "simulated")):
        ratios = [getattr(c, side) for c in cells]
        ax.barh([y + shift for y in ys], [r - 1.0 for r in ratios], 0.4, left=1.0, label=label)
    ax.axvline(1.0, color="red", linewidth=1, label="tie with the best baseline")
    labels = [f"{c.case} {c.measure} (vs {c.baseline})" for c in cells]  # live / sim best
    ax.set_yticks(list(ys), labels, fontsize=7)
    ax.invert_yaxis()
    low = min([0.9, *(min(c.live, c.sim) for c in cells)])
    ax.set_xlim(low * 0.95, max([1.1, *(max(c.live, c.sim) for c in cells)]) * 1.02)
    xlabel = "ours / the cell's best baseline (latency, makespan inverted): >= 1, ours as good"
    ratio_plot.finish(fig, ax, path, command, xlabel + " or better", columns=3)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live_plot")
    parser.add_argument("reports", type=Path, nargs="+", help="bench.live reports (markdown)")
    parser.add_argument("--out", type=Path, required=True, help="the plot (png)")
    args = parser.parse_args(argv)
    cells = [
        cell
        for report in args.reports
        for cell in judge(
            {f"{report.stem} {case}": rows for case, rows in parse(report.read_text()).items()}
        )
    ]
    if not cells:
        print("no case with ours and a baseline that finished every job", file=sys.stderr)
        return 1
    command = "python -m bench.live_plot " + " ".join(argv if argv is not None else sys.argv[1:])
    plot(cells, args.out, command)
    for c in cells:
        print(f"{c.case} {c.measure}: live {c.live:.3f}, sim {c.sim:.3f} (vs {c.baseline})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
