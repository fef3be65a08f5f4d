"""How long the event loop waits while the policy makes a large decision.

The dispatcher decides through `dispatcher.decide`: at once below `dispatcher.OFF_LOOP_AT`
groups x workers, above it in the policy's steps, serving the loop whenever
`dispatcher.STEP_S` has passed. This times, for the largest cases of `bench.decision`, the
longest step (CPU time: what the loop waits for at most), the loop's longest gap between two
1 ms ticks during one decision, and the longest gap over as long with no decision at all
(what the machine itself costs a loop: other processes, the OS).

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
from gateway.dispatch.dispatcher import OFF_LOOP_AT, STEP_S, collections_deferred, decide
from gateway.scheduler.policy import Stepwise, make_policy
from gateway.scheduler.snapshot import Snapshot
from gateway.serve import SWITCH_INTERVAL_S, freeze_heap

CASES = (
    ("burst", Size(10_000, 64, 64)),
    ("steady", Size(10_000, 64, 64)),
    ("steady", Size(100_000, 256, 256)),
    ("burst", Size(100_000, 256, 256)),
)
RUNS = 5
TARGET_MS = 5.0


async def longest_gap_s(snapshot: Snapshot | None, idle_s: float) -> tuple[float, float]:
    """(decision seconds, the loop's longest gap in seconds) while `snapshot` is decided as
    the dispatcher decides it; with no snapshot, the longest gap over `idle_s` of ticking."""
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
    await asyncio.sleep(0.02)
    gaps.clear()
    began = time.perf_counter()
    if snapshot is None:
        await asyncio.sleep(idle_s)
    else:
        await decide(make_policy("affinity"), snapshot)
    decision_s = time.perf_counter() - began
    done.set()
    await ticker
    return decision_s, max(gaps, default=0.0)


STOP = object()


def longest_step_s(snapshot: Snapshot) -> float:
    """CPU seconds of the decision's longest step: what the loop waits for at most, apart
    from what other processes take of the CPU meanwhile."""
    policy = make_policy("affinity")
    assert isinstance(policy, Stepwise)
    longest = 0.0
    steps = policy.steps(snapshot)
    with collections_deferred():  # as `decide` runs them
        while True:
            began = time.thread_time()
            if next(steps, STOP) is STOP:
                return longest
            longest = max(longest, time.thread_time() - began)


def row(case: str, size: Size) -> str:
    snapshot = build_snapshot(case, size)
    runs = [asyncio.run(longest_gap_s(snapshot, 0.0)) for _ in range(RUNS)]
    decision_ms = max(r[0] for r in runs) * 1e3
    gap_ms = max(r[1] for r in runs) * 1e3
    step_ms = max(longest_step_s(snapshot) for _ in range(RUNS)) * 1e3
    idle_ms = max(asyncio.run(longest_gap_s(None, decision_ms / 1e3))[1] for _ in range(RUNS))
    verdict = "met" if gap_ms <= TARGET_MS else "**missed**"
    cells = [
        case,
        size.label,
        f"{decision_ms:.1f} ms",
        f"{step_ms:.2f} ms",
        f"{gap_ms:.1f} ms",
        f"{idle_ms * 1e3:.1f} ms",
        verdict,
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.looplag", description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    freeze_heap()  # as `comfy-gateway serve` does before it serves
    header = [
        "case",
        "jobs x workers x models",
        f"decision (slowest of {RUNS})",
        f"longest step, CPU (of {RUNS})",
        f"longest loop gap during it (of {RUNS})",
        "longest gap with no decision, as long",
        f"gap <= {TARGET_MS:g} ms",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [row(case, size) for case, size in CASES]
    table = "\n".join(lines)
    print(table)
    if args.out:
        text = (
            "# Event loop gaps during a decision\n\n"
            f"Made by `python -m bench.looplag --out {args.out}` on {describe()}.\n"
            "`affinity` decides each snapshot of `bench.decision` through `dispatcher.decide` "
            f"(in steps from {OFF_LOOP_AT} groups x workers, the loop served every "
            f"{STEP_S * 1e3:g} ms, the garbage collector's passes deferred until it ends) while "
            "the loop ticks every 1 ms, at the gateway's switch interval "
            f"({SWITCH_INTERVAL_S * 1e3:g} ms), the heap frozen as `serve` freezes it before it "
            f"serves (`gateway.serve.freeze_heap`). Target: no gap over {TARGET_MS:g} ms; "
            "the gap with no decision shows what the machine adds on its own.\n\n"
            f"{table}\n"
        )
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
