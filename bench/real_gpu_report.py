"""The report of `bench.real_gpu` runs: every policy's row, the issue's targets with a verdict,
the policy-independent cases, and the simulator's prediction of the 24-job trace beside the
real makespans (the simulator runs the gateway's policies on two `h200-pair` workers: two
instances sharing one H200, both busy).

    python -m bench.real_gpu_report FILE.json [FILE.json ...] [--out bench/results/real_gpu.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.real_gpu import POLICIES, TRACE, A, once_lines, table
from bench.sim.bounds import warm_best_s
from bench.sim.costs import make_card
from bench.sim.engine import SimConfig, Simulator
from bench.sim.farm import WorkerSpec
from bench.sim.metrics import summarise
from bench.sim.scenario import build_policy
from bench.sim.trace import SimJob
from gateway.scheduler.policy import slots_per_worker
from workers.emulator.costmodel import JobShape

OURS = "affinity"
BASELINES = tuple(p for p in POLICIES if p != OURS)
SIM_PROFILE, SIM_ARGS = "h200-pair", ("--cache-lru", "8")


def _cases(runs: Sequence[dict[str, Any]], policy: str, case: str, key: str) -> list[float]:
    """`key` of `case` in every run of `policy` (with preload) that measured it."""
    return [
        r["cases"][case][key]
        for r in runs
        if r["policy"] == policy and r["preload"] and r["cases"].get(case, {}).get(key)
    ]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.mean(values) if values else None


def target_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| target | ours (mean of runs) | reference | ratio | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, case, key, limit in (
        ("interactive: total latency within 1.1x of the best baseline", "sequential",
         "total_latency_s", 1.1),
        ("burst of 4: makespan within 1.05x of the best baseline", "burst", "makespan_s", 1.05),
    ):  # fmt: skip
        ours = _mean(_cases(runs, OURS, case, key))
        best = min(
            ((m, p) for p in BASELINES if (m := _mean(_cases(runs, p, case, key))) is not None),
            default=None,
        )
        if ours is not None and best is not None:
            lines.append(
                _target_row(label, ours, f"{best[1]} {best[0]:.2f} s", ours / best[0], limit)
            )
    ours = _mean(_cases(runs, OURS, "trace", "makespan_s"))
    swarm = _mean(_cases(runs, "swarm_like", "trace", "makespan_s"))
    robin = _mean(_cases(runs, "round_robin", "trace", "makespan_s"))
    if ours is not None and swarm is not None:
        lines.append(_target_row("18:4:2 trace: no slower than swarm_like", ours,
                                 f"swarm_like {swarm:.2f} s", ours / swarm, 1.0))  # fmt: skip
    if ours is not None and robin is not None:
        verdict = "yes" if robin / ours >= 1.5 else "**no**"
        lines.append(
            f"| 18:4:2 trace: at least 1.5x faster than round_robin | {ours:.2f} s | round_robin "
            f"{robin:.2f} s | {robin / ours:.2f}x faster | {verdict} |"
        )
    overhead = [r["cases"]["overhead"]["overhead_ms"] for r in runs if "overhead" in r["cases"]]
    if overhead:
        lines.append(
            f"| gateway overhead under 10 ms per job | {overhead[-1]:+.1f} ms | direct ComfyUI | - "
            f"| {'yes' if overhead[-1] < 10 else '**no**'} |"
        )
    return lines


def _target_row(label: str, ours: float, reference: str, ratio: float, limit: float) -> str:
    verdict = "yes" if ratio <= limit else "**no**"
    return f"| {label} | {ours:.2f} s | {reference} | {ratio:.2f} | {verdict} |"


def simulated_trace_s(policy: str) -> float:
    """The simulator's makespan of the 24-job trace on two `h200-pair` workers holding A."""
    shape = JobShape(A, "sd15", 20, 512, 512)
    specs = [WorkerSpec(f"w{i}", SIM_PROFILE, SIM_ARGS) for i in range(2)]
    cards = tuple(make_card(spec, [(shape, 1.0)]) for spec in specs)
    jobs = [SimJob(f"t{i}", 0.0, JobShape(c, "sd15", 20, 512, 512)) for i, c in enumerate(TRACE)]
    chosen, config = build_policy(policy), SimConfig(learned_speeds=True)
    slots = slots_per_worker(chosen, config.slots)
    families = {name: "sd15" for name in TRACE}
    sim = Simulator(chosen, cards, families, {s.name: A for s in specs}, config, slots)
    return summarise(sim.run(jobs), [warm_best_s(cards, j.shape) for j in jobs]).makespan_s


def sim_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| policy | real makespan s (runs) | simulated s | simulated / real | within 15 % |",
        "| --- | --- | --- | --- | --- |",
    ]
    for policy in POLICIES:
        real = _cases(runs, policy, "trace", "makespan_s")
        if not real:
            continue
        simulated, mean = simulated_trace_s(policy), statistics.mean(real)
        ratio = simulated / mean
        shown = ", ".join(f"{r:.2f}" for r in real)
        verdict = "yes" if abs(ratio - 1) <= 0.15 else "**no**"
        lines.append(f"| {policy} | {shown} | {simulated:.2f} | {ratio:.2f} | {verdict} |")
    return lines


def learned_lines(runs: Sequence[dict[str, Any]], label: str) -> list[str]:
    out = []
    for run in runs:
        speeds = [
            f"{w['name']} {w['learned']['families']['sd15']['units_per_s']:.2f}"
            for w in run.get("workers_at_end", [])
            if "sd15" in (w.get("learned") or {}).get("families", {})
        ]
        if speeds:
            out.append(f"- {label}, {run['policy']}: SD1.5 {', '.join(speeds)} units/s")
    return out


def cold_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Ready time and first job after `serve`, with and without preload."""
    out = []
    for preload in (True, False):
        chosen = [r for r in runs if r["preload"] is preload and "first" in r["cases"]]
        if chosen:
            ready = ", ".join(f"{r['ready_s']:.1f}" for r in chosen)
            first = ", ".join(f"{r['cases']['first']['makespan_s']:.2f}" for r in chosen)
            out.append(
                f"- {'with' if preload else 'without'} preload: ready {ready} s after `serve`; "
                f"first SD1.5 job {first} s"
            )
    return out


def load(paths: Sequence[Path]) -> list[dict[str, Any]]:
    return [run for path in paths for run in json.loads(path.read_text())["runs"]]


def report(paths: Sequence[Path], before: Path | None) -> str:
    runs = load(paths)
    parts = [
        "# Real ComfyUI on one H200 behind the gateway",
        "",
        f"Made by `python -m bench.real_gpu_report {' '.join(str(p) for p in paths)}` from the raw "
        'runs of `python -m bench.real_gpu` (commands and set-up in README.md, "Measured on a '
        'real card").',
        "",
        "## Every policy, each on a fresh gateway",
        "",
        table(runs),
        "",
        "## The targets",
        "",
        *target_lines(runs),
        "",
        "## Cases that do not depend on placement (under the first policy of a run)",
        "",
        *[f"- {line}" for line in once_lines(runs)],
        *cold_lines(runs),
        "",
        "## The simulator's 24-job trace against the real one",
        "",
        *sim_lines(runs),
        "",
        "## What the gateway learned of SD1.5 (units/s; 20-step 512x512 jobs are 5.24 units)",
        "",
        *[line for path in paths for line in learned_lines(load([path]), path.stem)],
        *(learned_lines(load([before]), before.stem) if before else []),
        "",
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_gpu_report")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--before", type=Path, default=None, help="a run before the fixes")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = report(args.files, args.before)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
