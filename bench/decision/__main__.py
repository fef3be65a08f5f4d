"""`python -m bench.decision [--quick] [--policies A,B] [--out DIR]`: time decisions, print the
table, write decision.md and decision.png (to bench/results by default; `--quick` writes only
with `--out`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.decision.report import table, write
from bench.decision.snapshots import QUICK_SIZES, SIZES
from bench.decision.timing import POLICIES, QUICK_BUDGET, Budget, run_rows

RESULTS = Path(__file__).resolve().parents[1] / "results"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decision", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="two small sizes, a few calls each")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument(
        "--out", type=Path, default=None, help="default: bench/results (not with --quick)"
    )
    args = parser.parse_args(argv)
    budget = QUICK_BUDGET if args.quick else Budget()
    sizes = QUICK_SIZES if args.quick else SIZES
    rows = run_rows(sizes, args.policies.split(","), budget)
    print(table(rows))
    out = args.out or (None if args.quick else RESULTS)
    if out is not None:
        command = "python -m bench.decision " + " ".join(argv if argv is not None else sys.argv[1:])
        print(f"wrote {write(rows, out, command.strip(), budget)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
