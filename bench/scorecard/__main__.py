"""`python -m bench.scorecard [--quick|--full] [--seeds N] [--processes 2] [--out DIR]`: run
the grid, print the failing cells, write scorecard.md and scorecard.png (to bench/results by
default; `--quick` writes only with `--out`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.machine import describe
from bench.scorecard import goals
from bench.scorecard.grid import Cell, grid
from bench.scorecard.report import failing_section, markdown, plot
from bench.scorecard.runner import POLICIES, Row, rows_by_cell, run_all, runs_of

RESULTS = Path(__file__).resolve().parents[1] / "results"
SEEDS = {"quick": 1, "default": 2, "full": 3}
KEYS = (*(m.key for m in (*goals.METRICS, goals.LOADS)), "lower_bound_s", "planner_s", "wall_s")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scorecard", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="six small cells, one seed")
    size.add_argument("--full", action="store_true", help="the whole grid (hours)")
    parser.add_argument("--seeds", type=int, default=0, help="default: quick 1, 2, full 3")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--cap-s", type=float, default=600.0, help="wall seconds per run")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def judge_all(rows: Sequence[Row], cells: Sequence[Cell], grid_name: str) -> list[goals.Judged]:
    """Each cell judged on the mean of its seeds."""
    by_cell = rows_by_cell(rows, cells, grid_name)
    return [goals.judge(c, goals.mean_over_seeds(by_cell[c], KEYS)) for c in cells]


def command_of(args: argparse.Namespace) -> str:
    return ("python -m bench.scorecard " + " ".join(args.argv)).strip()


def header(args: argparse.Namespace, rows: Sequence[Row], wall_s: float, machine: str) -> list[str]:
    command = command_of(args)
    seconds: dict[str, float] = {}
    for row in rows:
        seconds[str(row["policy"])] = seconds.get(str(row["policy"]), 0.0) + float(
            str(row["wall_s"])
        )
    spent = ", ".join(f"{p} {seconds.get(p, 0.0):.0f} s" for p in POLICIES)
    errors = sorted({f"{r['policy']}: {r['error']}" for r in rows if r.get("error")})
    lines = [
        f"Made by `{command}` on {machine}.",
        f"{len(rows)} runs ({args.seeds} seeds) in {wall_s:.0f} s wall with {args.processes} "
        f"processes; simulation seconds by policy: {spent}.",
    ]
    cut = [r for r in rows if r["cut"] and not r.get("error")]
    if cut:
        lines.append(f"{len(cut)} runs cut at {args.cap_s:g} s (their policy has no result).")
    if errors:
        lines.append("Runs that failed: " + "; ".join(errors))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    grid_name = "quick" if args.quick else "full" if args.full else "default"
    args.seeds = args.seeds or SEEDS[grid_name]
    machine = describe()
    began = time.perf_counter()
    cells = grid(grid_name)
    rows = run_all(runs_of(cells, grid_name, args.seeds, POLICIES, args.cap_s), args.processes)
    wall_s = time.perf_counter() - began
    judged = judge_all(rows, cells, grid_name)
    print(failing_section(judged))
    print(f"{len(rows)} runs in {wall_s:.0f} s", file=sys.stderr)
    out = args.out or (None if args.quick else RESULTS)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        lines = header(args, rows, wall_s, machine)
        (out / "scorecard.md").write_text(markdown(judged, lines))
        plot(judged, out / "scorecard.png", command_of(args))
        print(f"wrote {out / 'scorecard.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
