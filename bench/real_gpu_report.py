"""The report of `bench.real_gpu` runs: every policy's row, the issue's targets with a verdict,
the policy-independent cases, and the simulator's prediction of the 24-job trace beside the
real makespans (the simulator runs the gateway's policies on two `h200-pair` workers: two
instances sharing one H200, both busy); the physical lower bound of that trace on the card; the
A/B run's report; and, when given, the `--cache-lru` check (`bench.cache_lru`) and contract
suite summaries.

    python -m bench.real_gpu_report FILE.json [FILE.json ...] [--out bench/results/real_gpu.md]
        [--cache-lru CACHE.json] [--contract LABEL=PYTEST_OUTPUT.txt ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import cache_lru
from bench.real_gpu import AB_CASE, BURST, POLICIES, SEQUENTIAL, STEPS, TRACE, A, once_lines, table
from bench.sim.bounds import warm_best_s
from bench.sim.costs import make_card
from bench.sim.engine import SimConfig, Simulator
from bench.sim.farm import WorkerSpec
from bench.sim.metrics import summarise
from bench.sim.scenario import build_policy
from bench.sim.trace import SimJob
from gateway.scheduler.policy import slots_per_worker
from workers.comfy.families import family_of
from workers.emulator.card.costmodel import JobShape
from workers.warmup.prompts import native_size_px

STEPS_NOTE = (
    f"txt2img prompts with fresh seeds ({cache_lru.STEPS} steps, 512x512) one after another "
    "over three SD1.5 checkpoints; R: the loader ran (a reload), `.`: it was cached."
)
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


def service_gaps(jobs: Sequence[dict[str, Any]]) -> list[tuple[float, bool]]:
    """(seconds since the previous completion, whether it loaded) of jobs that one instance
    served back to back: what each took of the card, queueing aside."""
    ends = sorted((j["sent_s"] + j["latency_s"], bool(j["loaded"])) for j in jobs if j["latency_s"])
    return [
        (end - before, loaded)
        for (before, _), (end, loaded) in itertools.pairwise([(0.0, False), *ends])
    ]


def paired_gaps(jobs: Sequence[dict[str, Any]]) -> list[float]:
    """Gaps between one worker's consecutive warm completions while the other worker was still
    busy (finished something later): a job's time with the card shared."""
    by_worker: dict[str, list[tuple[float, bool]]] = {}
    for j in jobs:
        if j["latency_s"] and j.get("worker"):
            by_worker.setdefault(j["worker"], []).append(
                (j["sent_s"] + j["latency_s"], j["loaded"])
            )
    gaps = []
    for worker, ends in by_worker.items():
        last_other = max(
            (e for w, v in by_worker.items() if w != worker for e, _ in v), default=0.0
        )
        ends.sort()
        gaps += [
            b - a
            for (a, _), (b, loaded) in itertools.pairwise(ends)
            if not loaded and b < last_other
        ]
    return gaps


def trace_bound(runs: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """The 24-job trace's physical lower bound on the one card from the raw runs: every job at
    the card's best warm rate (one instance alone, from the `direct` case, or two sharing it,
    from the trace runs, whichever does more), plus the loads no schedule avoids (B and C; A
    also without preload), hidden behind the other instance's compute or not."""
    direct = [g for r in runs for g in service_gaps(r["cases"].get("direct", {}).get("runs", []))]
    paired = [g for r in runs for g in paired_gaps(r["cases"].get("trace", {}).get("runs", []))]
    warm = [s for s, loaded in direct if not loaded]
    loading = [s for s, loaded in direct if loaded]
    if not warm or not loading or not paired:
        return None
    alone_s, shared_s = statistics.median(warm), statistics.median(paired)
    card_s = min(alone_s, shared_s / 2)
    load_s = statistics.median(loading) - alone_s
    compute_s = len(TRACE) * card_s
    unavoidable = len(set(TRACE) - {A})
    return {
        "alone_s": alone_s, "shared_s": shared_s, "card_s": card_s, "load_s": load_s,
        "compute_s": compute_s, "loads": unavoidable,
        "hidden_s": compute_s, "serial_s": compute_s + unavoidable * load_s,
        "serial_cold_s": compute_s + (unavoidable + 1) * load_s,
    }  # fmt: skip


def bound_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    bound = trace_bound(runs)
    robin = _mean(_cases(runs, "round_robin", "trace", "makespan_s"))
    if bound is None or robin is None:
        return ["- not enough raw data (needs the `direct` case and trace runs)"]
    b, needed = bound, robin / 1.5
    return [
        f"- One ComfyUI alone on the card: a warm SD1.5 job takes {b['alone_s']:.3f} s of it "
        f"(median of {len(TRACE)}-job `direct` runs, completions back to back); two instances "
        f"sharing it: {b['shared_s']:.3f} s each, {b['shared_s'] / 2:.3f} s of card per job. "
        f"Two instances add no throughput: the card does one job per {b['card_s']:.3f} s at best.",
        f"- A load (page cache, SD1.5) adds {b['load_s']:.3f} s to its job. With A preloaded on "
        f"both instances the trace needs {b['loads']} loads (B, C) whatever the schedule.",
        f"- Lower bound at that (median) rate: {len(TRACE)} x {b['card_s']:.3f} = "
        f"{b['compute_s']:.2f} s of compute, "
        f"{b['hidden_s']:.2f} s if every load hid behind the other instance's compute, "
        f"{b['serial_s']:.2f} s if they do not ({b['serial_cold_s']:.2f} s with A's load too).",
        f"- 1.5x faster than round_robin ({robin:.2f} s) means {needed:.2f} s: "
        f"{needed / b['hidden_s']:.3f}x the bound with every load hidden and no gap between jobs, "
        f"{needed / b['serial_s']:.3f}x the bound with loads in series. "
        + (
            "**Not reachable** on one card: at the bound round_robin would be "
            f"{robin / b['hidden_s']:.2f}x (loads hidden) to {robin / b['serial_s']:.2f}x slower."
            if needed < b["serial_s"]
            else "Reachable in principle."
        ),
    ]


def ab_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    """The A/B run's `comfy-gateway ab report` table and its workers' launch args."""
    out = []
    for run in runs:
        ab = run["cases"].get(AB_CASE)
        if run.get("case") != AB_CASE or not ab:
            continue
        args = "; ".join(
            f"{w['name']}: `{' '.join(w.get('args') or []) or '(none)'}`"
            for w in run.get("workers_at_start", [])
        )
        out += [
            f"`{ab['flag']}` against ComfyUI's default attention (PyTorch SDPA), {ab['checkpoint']}"
            f" 1024x1024, 20 steps, two jobs in flight (one per group, so both share the card "
            f"alike), {ab['jobs']} jobs; workers {args}.",
            "",
            "```",
            ab["cli"].strip(),
            "```",
            "",
            f"Verdict: **{ab['verdict']}**",
        ]
    return out


def contract_lines(contracts: Sequence[tuple[str, Path]]) -> list[str]:
    """The summary line pytest printed for each contract run."""
    out = []
    for label, path in contracts:
        lines = [line.strip("= ") for line in path.read_text().splitlines() if " in " in line]
        out.append(f"- {label}: {lines[-1] if lines else 'no summary'} (`{path}`)")
    return out


def simulated_trace_s(policy: str) -> float:
    """The simulator's makespan of the 24-job trace on two `h200-pair` workers holding A."""
    shape = _shape(A)
    specs = [WorkerSpec(f"w{i}", SIM_PROFILE, SIM_ARGS) for i in range(2)]
    cards = tuple(make_card(spec, [(shape, 1.0)]) for spec in specs)
    jobs = [SimJob(f"t{i}", 0.0, _shape(c)) for i, c in enumerate(TRACE)]
    chosen, config = build_policy(policy), SimConfig(learned_speeds=True)
    slots = slots_per_worker(chosen, config.slots)
    families = {name: "sd15" for name in TRACE}
    sim = Simulator(chosen, cards, families, {s.name: A for s in specs}, config, slots)
    return summarise(sim.run(jobs), [warm_best_s(cards, j.shape) for j in jobs]).makespan_s


def _shape(checkpoint: str) -> JobShape:
    """The bench's txt2img job for `checkpoint` (its family's native size, `STEPS` steps)."""
    family = family_of(checkpoint)
    side = native_size_px(family)
    return JobShape(checkpoint, family, STEPS, side, side)


def simulated_interactive(policy: str, profile: str, args: Sequence[str]) -> tuple[float, float]:
    """The simulator's `first`, `sequential` and `burst` cases as the bench runs them, one
    after another on the same two workers holding A (`profile`, launched with `args`), each
    job of the sequential case sent when the one before has finished and the burst when the
    last of them has: (the sequential case's total latency, the burst's makespan)."""
    specs = [WorkerSpec(f"w{i}", profile, tuple(args)) for i in range(2)]
    cards = tuple(make_card(spec, [(_shape(A), 1.0)]) for spec in specs)
    jobs = [SimJob("first", 0.0, _shape(A))]
    for i, checkpoint in enumerate(SEQUENTIAL):
        jobs.append(SimJob(f"s{i}", 0.0, _shape(checkpoint), follows=(jobs[-1].job_id,)))
    last = jobs[-1].job_id
    jobs += [SimJob(f"b{i}", 0.0, _shape(c), follows=(last,)) for i, c in enumerate(BURST)]
    chosen, config = build_policy(policy), SimConfig(learned_speeds=True)
    slots = slots_per_worker(chosen, config.slots)
    families = {c: family_of(c) for c in {*SEQUENTIAL, *BURST, A}}
    sim = Simulator(chosen, cards, families, {s.name: A for s in specs}, config, slots)
    records = sim.run(jobs).records
    sequential = sum(r.end_s - r.job.arrival_s for r in records if r.job.job_id[0] == "s")
    burst = [r for r in records if r.job.job_id[0] == "b"]
    return sequential, max(r.end_s for r in burst) - min(r.job.arrival_s for r in burst)


def interactive_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Real against simulated, the sequential case on `h200` (the other instance idle), the
    burst on `h200-pair` (both busy), with the runs' worker args."""
    started = [w for r in runs for w in r.get("workers_at_start", [])]
    args = started[0]["args"] if started else list(SIM_ARGS)
    lines = [
        f"Simulated with the runs' worker args (`{' '.join(args)}`): the sequential case on"
        " `h200` (the other instance idle), the burst on `h200-pair` (both busy); the simulated"
        " column is this tree's policy, the real one the policy of the runs.",
        "",
        "| policy | sequential total s, real (runs) | simulated | burst makespan s, real (runs)"
        " | simulated |",
        "| --- | --- | --- | --- | --- |",
    ]
    for policy in POLICIES:
        sequential = _cases(runs, policy, "sequential", "total_latency_s")
        burst = _cases(runs, policy, "burst", "makespan_s")
        if not sequential and not burst:
            continue
        sim_sequential, _ = simulated_interactive(policy, "h200", args)
        _, sim_burst = simulated_interactive(policy, SIM_PROFILE, args)
        lines.append(
            f"| {policy} | {', '.join(f'{r:.2f}' for r in sequential) or '-'} | "
            f"{sim_sequential:.2f} | {', '.join(f'{r:.2f}' for r in burst) or '-'} | "
            f"{sim_burst:.2f} |"
        )
    return lines


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


def _options(
    paths: Sequence[Path],
    before: Path | None,
    cache: Path | None,
    contracts: Sequence[tuple[str, Path]],
    judged: Sequence[Path] = (),
) -> str:
    words = [str(p) for p in paths]
    words += [f"--before {before}"] if before else []
    words += [f"--cache-lru {cache}"] if cache else []
    words += [f'--contract "{label}={path}"' for label, path in contracts]
    words += [f"--judge {path}" for path in judged]
    return " ".join(words)


def load(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Every run of the files, each marked with its file's name."""
    return [
        {**run, "file": path.stem} for path in paths for run in json.loads(path.read_text())["runs"]
    ]


def report(
    paths: Sequence[Path],
    before: Path | None,
    cache: Path | None = None,
    contracts: Sequence[tuple[str, Path]] = (),
    judged: Sequence[Path] = (),
) -> str:
    """The report of the runs in `paths`; the targets are judged on the runs of `judged` (the
    tree being judged; all of `paths` if none)."""
    runs = load(paths)
    policy_runs = [r for r in runs if r.get("case") != AB_CASE]
    judged_runs = [r for r in load(judged) if r.get("case") != AB_CASE] if judged else policy_runs
    options = _options(paths, before, cache, contracts, judged)
    parts = [
        "# Real ComfyUI on one H200 behind the gateway",
        "",
        f"Made by `python -m bench.real_gpu_report {options}` "
        "from the raw runs of `python -m bench.real_gpu`, `python -m bench.cache_lru` and pytest "
        '(commands and set-up in README.md, "Measured on a real card").',
        "",
        "## Every policy, each on a fresh gateway",
        "",
        table(policy_runs),
        "",
        f"## The targets ({', '.join(p.stem for p in judged) if judged else 'every run'})",
        "",
        *target_lines(judged_runs),
        "",
        "## How fast the 18:4:2 trace can be on one card (from the raw runs)",
        "",
        *bound_lines(policy_runs),
        "",
        "## Cases that do not depend on placement (under the first policy of a run)",
        "",
        *[f"- {line}" for line in once_lines(runs)],
        *cold_lines(runs),
        "",
        "## The simulator's 24-job trace against the real one",
        "",
        *sim_lines(policy_runs),
        "",
        "## The simulator's interactive cases against the real ones (the judged runs)",
        "",
        *interactive_lines(judged_runs),
        "",
        *(["## A/B on the card", "", *ab_lines(runs), ""] if ab_lines(runs) else []),
        *(
            ["## The contract suite on the card", "", *contract_lines(contracts), ""]
            if contracts
            else []
        ),
        *(
            [
                "## What `--cache-lru N` keeps (`python -m bench.cache_lru`)",
                "",
                f"Raw: `{cache}`. One ComfyUI per mode, all on the card at once, {STEPS_NOTE}",
                "",
                cache_lru.table(json.loads(cache.read_text())),
                "",
            ]
            if cache
            else []
        ),
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
    parser.add_argument("--cache-lru", dest="cache", type=Path, default=None)
    parser.add_argument("--contract", action="append", default=[], help="LABEL=FILE")
    parser.add_argument(
        "--judge", action="append", default=[], type=Path,
        help="a file of runs the targets are judged on (default: every file)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    contracts = [
        (label, Path(file)) for label, _, file in (c.rpartition("=") for c in args.contract)
    ]
    text = report(args.files, args.before, args.cache, contracts, args.judge)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
