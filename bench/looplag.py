"""How long the event loop waits while the policy makes a large decision off the loop.

The dispatcher hands a decision of at least `dispatcher.OFF_LOOP_AT` groups x workers to a
thread; pure Python holds the GIL, which the interpreter hands back every switch interval. This
times the loop's longest gap between two 1 ms ticks during one such decision (a fresh burst,
the slowest case of `bench.decision`), at Python's default switch interval and at the
gateway's (`gateway.serve.SWITCH_INTERVAL_S`).

    python -m bench.looplag [--out bench/results/looplag.md]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import gateway.scheduler  # noqa: F401  (registers the policies)
from bench.decision.snapshots import Size, build_snapshot
from bench.machine import describe
from gateway.scheduler.policy import make_policy
from gateway.serve import SWITCH_INTERVAL_S

SIZE = Size(10_000, 64, 64)
INTERVALS_S = (0.005, SWITCH_INTERVAL_S)
RUNS = 3


async def longest_gap_s(interval_s: float) -> tuple[float, float]:
    """(decision seconds, longest loop gap in seconds) for one burst decision on a thread."""
    sys.setswitchinterval(interval_s)
    snapshot = build_snapshot("burst", SIZE)
    policy = make_policy("affinity")
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    began = time.perf_counter()
    await asyncio.to_thread(policy.assign, snapshot)
    decision_s = time.perf_counter() - began
    done.set()
    await ticker
    return decision_s, max(gaps)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.looplag", description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for interval_s in INTERVALS_S:
        runs = [asyncio.run(longest_gap_s(interval_s)) for _ in range(RUNS)]
        decision_ms = max(r[0] for r in runs) * 1e3
        gap_ms = max(r[1] for r in runs) * 1e3
        rows.append(f"| {interval_s * 1e3:g} ms | {decision_ms:.0f} ms | {gap_ms:.1f} ms |")
    table = "\n".join(
        [
            "| switch interval | decision (slowest of 3) | longest loop gap (of 3) |",
            "|---|---|---|",
            *rows,
        ]
    )
    print(table)
    if args.out:
        text = (
            "# Event loop gaps during a decision off the loop\n\n"
            f"Made by `python -m bench.looplag --out {args.out}` on {describe()}.\n"
            f"A fresh burst of {SIZE.label} (jobs x workers x models) decided by `affinity` on "
            "a thread while the loop ticks every 1 ms. Target: no gap over 5 ms.\n\n"
            f"{table}\n"
        )
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
