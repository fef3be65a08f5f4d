"""The long fault soak: `tests/faults/test_nemesis.py -m slow` (jobs under worker and gateway
SIGKILLs, with its checker), its reports gathered into one table.

    python -m bench.soak [--jobs 1000] [--seeds 2,3,4]

Writes bench/results/soak.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "soak.md"
COLUMNS = ("seed", "accepted", "worker_kills", "gateway_kills", "retried_posts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seeds", default="2,3,4", help="a subset of 2,3,4")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "NEMESIS_JOBS": str(args.jobs), "NEMESIS_REPORT_DIR": out}
        selected = " or ".join(f"seed{s}" for s in args.seeds.split(","))
        argv = [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider",
                "tests/faults/test_nemesis.py", "-k", selected.replace("seed", "")]  # fmt: skip
        code = subprocess.run(argv, env=env, check=False).returncode
        reports = [json.loads(p.read_text()) for p in sorted(Path(out).glob("*.json"))]
    table = _table(reports, args.jobs, code)
    print(table)
    RESULTS.write_text(table)


def _table(reports: list[dict[str, object]], jobs: int, code: int) -> str:
    lines = [
        f"# Fault soak: {jobs} jobs per seed under worker and gateway SIGKILLs",
        "",
        "`python -m bench.soak` (the checker of `tests/faults/test_nemesis.py`; pytest exit "
        f"code {code}).",
        "",
        "| "
        + " | ".join([*COLUMNS, "lost", "run twice", "cut after output", "history mismatches"])
        + " |",
        "|" + " --- |" * (len(COLUMNS) + 4),
    ]
    for r in reports:
        extra = len(r["history_extra"]) + len(r["history_missing"])  # type: ignore[arg-type]
        cells = [str(r[c]) for c in COLUMNS]
        cut = len(r.get("cut_after_output", []))  # type: ignore[arg-type]
        cells += [str(len(r["lost"])), str(len(r["duplicates"])), str(cut), str(extra)]  # type: ignore[arg-type]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
