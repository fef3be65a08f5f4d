"""`python -m bench.sim EXPERIMENT [--seeds N] [--jobs N]`: run and write bench/results/sim_*.

Experiments: standard (every policy at 50-95 % load), stability (10,000-job runs), cheap (cheap
residency), traces (bursty, sessions), farms (2/4/8 workers x K x Zipf s), batch (bursts against
bounds), run (one scenario, printed), all.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bench.sim import experiments as ex
from bench.sim import report as rp
from bench.sim.experiments import Row
from bench.sim.scenario import Scenario, simulate

OURS = rp.OURS
SWARM = "swarm_like"


def _ratio(a: float, b: float) -> str:
    return rp.fmt(a / b, 2) + "x" if b else "-"


def _standard(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.standard(args.jobs or 2000, args.seeds or 3), args.processes)
    sections = []
    for (load,), lrows in sorted(rp.by(rows, "load").items(), key=lambda kv: str(kv[0])):
        sections.append(f"## load {load}\n\n" + rp.summary_table(lrows, ex.STANDARD_POLICIES))
    sections.insert(0, _targets(rows))
    sections.insert(
        1,
        "2,000-job runs, 3 seeds, means. The stable column on runs this short is only a hint; "
        "stability is judged on 10,000-job runs (`sim_stability.md`). Goodput: jobs finished "
        "within 2 x their warm time on the fastest card + 10 s, per second of the run.",
    )
    rp.write("sim_standard.md", command, "Standard scenario, every policy, 50-95 % load", sections)
    plots = {
        "sim_latency_p95.png": (lambda r: rp.mean(r, "p95_s"), "p95 latency, s", True),
        "sim_latency_p50.png": (lambda r: rp.mean(r, "p50_s"), "median latency, s", True),
        "sim_goodput.png": (lambda r: rp.mean(r, "goodput_per_s"), "goodput, jobs/s", False),
        "sim_loads.png": (
            lambda r: rp.mean(r, "loads_per_100"),
            "checkpoint loads / 100 jobs",
            False,
        ),
    }
    title = "standard scenario: 2 h200 + 2 rtx4070ti, K = 8, Zipf 1 (mean of seeds)"
    for name, (metric, label, log) in plots.items():
        rp.line_plot(rows, metric, label, rp.RESULTS / name, command, log, title)
    at80 = [r for r in rows if r["load"] == 0.8]
    split_title = "GPU time at 80 % load (unstable policies: over their whole, longer, run)"
    rp.split_plot(at80, ex.POLICIES, rp.RESULTS / "sim_gpu_split.png", command, split_title)


def _targets(rows: Sequence[Row]) -> str:
    at = rp.by([r for r in rows if r["load"] == 0.8], "policy")
    swarm = at[(SWARM,)]
    body = []
    for name in (OURS,):
        ours = at[(name,)]
        good = rp.mean(ours, "goodput_per_s"), rp.mean(swarm, "goodput_per_s")
        p95 = rp.mean(ours, "p95_s"), rp.mean(swarm, "p95_s")
        body += [
            [name, "goodput vs swarm_like", ">= 1.5x", _ratio(*good)],
            [name, "p95 vs swarm_like", "<= 0.7x (stretch 0.6x)", _ratio(*p95)],
            [name, "loads / 100 jobs", "<= 15", rp.fmt(rp.mean(ours, "loads_per_100"))],
        ]
    return "## Targets at 80 % load (mean of seeds)\n\n" + rp.table(
        ("policy", "target", "wanted", "got"), body
    )


def _stability(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.stability(args.jobs or 10000, args.seeds or 3), args.processes)
    header = ("policy", "load", "stable runs", "backlog growth", "p50 s", "p95 s", "loads/100")
    body: list[list[str]] = [
        [
            str(policy),
            str(load),
            rp.stable_cell(r),
            rp.fmt(rp.mean(r, "growth"), 3),
            rp.fmt(rp.mean(r, "p50_s")),
            rp.fmt(rp.mean(r, "p95_s")),
            rp.fmt(rp.mean(r, "loads_per_100")),
        ]
        for (policy, load), r in sorted(rp.by(rows, "policy", "load").items(), key=str)
    ]
    note = (
        "A run is stable when fewer than 2 % of the arrivals of the second half of the arrival "
        "window pile up (backlog growth = (mean backlog over the last 10 % of the window - mean "
        "over 40-50 %) / arrivals in between)."
    )
    rp.write(
        "sim_stability.md", command, "Stability on 10,000-job runs", [note, rp.table(header, body)]
    )


def _cheap(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.cheap(args.jobs or 2000, args.seeds or 3), args.processes)
    sections = []
    for (farm, k), r in sorted(rp.by(rows, "farm", "k").items(), key=str):
        groups = rp.by(r, "policy")
        ours, ect = groups[(OURS,)], groups[("ect_greedy",)]
        goodput = _ratio(rp.mean(ours, "goodput_per_s"), rp.mean(ect, "goodput_per_s"))
        p95 = _ratio(rp.mean(ours, "p95_s"), rp.mean(ect, "p95_s"))
        verdict = (
            f"affinity / ect_greedy: goodput {goodput} (want >= 0.98x), p95 {p95} (want <= 1.2x)"
        )
        sections.append(
            f"## farm {farm}, K = {k}, 80 % load\n\n{verdict}\n\n"
            + rp.summary_table(r, ex.POLICIES)
        )
    rp.write("sim_cheap.md", command, "Where residency is cheap", sections)


def _traces(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.traces(args.jobs or 2000, args.seeds or 3), args.processes)
    sections = [
        f"## {arrival} arrivals, 80 % load\n\n" + rp.summary_table(r, ex.POLICIES)
        for (arrival,), r in sorted(rp.by(rows, "arrival").items(), key=str)
    ]
    rp.write("sim_traces.md", command, "Bursty and session traces on the standard farm", sections)


def _farms(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.farms(args.jobs or 2000, args.seeds or 1), args.processes)
    policies = ex.FARM_POLICIES
    header = ("farm", "K", "s", *(f"{p} goodput / p95 / loads" for p in policies))
    body = []
    for (farm, k, s), r in sorted(rp.by(rows, "farm", "k", "zipf_s").items(), key=str):
        groups = rp.by(r, "policy")
        cells = [
            f"{rp.fmt(rp.mean(g, 'goodput_per_s'), 2)} / {rp.fmt(rp.mean(g, 'p95_s'))} / "
            f"{rp.fmt(rp.mean(g, 'loads_per_100'))}"
            for g in (groups[(p,)] for p in policies)
        ]
        body.append([str(farm), str(k), str(s), *cells])
    rp.write(
        "sim_farms.md",
        command,
        "Farms x catalogue sizes x popularity skew, 80 % load",
        [
            "Each cell: goodput (jobs/s) / p95 latency (s) / loads per 100 jobs.",
            rp.table(header, body),
        ],
    )


def _batch(args: argparse.Namespace, command: str) -> None:
    seeds = args.seeds or 3
    rows = ex.run_all(ex.batch(seeds), args.processes)
    planned = {(r["farm"], r["jobs"], r["seed"]): r for r in ex.planned_makespans(seeds)}
    header = (
        "farm",
        "jobs",
        "policy",
        "makespan s",
        "/ lower bound",
        "/ planner",
        "/ optimum",
        "loads",
    )
    body = []
    for (farm, jobs, policy), r in sorted(rp.by(rows, "farm", "jobs", "policy").items(), key=str):
        plans = [planned[(farm, jobs, x["seed"])] for x in r]
        make = rp.mean(r, "makespan_s")
        optimum = rp.mean(plans, "optimum_s") if "optimum_s" in plans[0] else float("nan")
        body.append(
            [
                str(farm),
                str(jobs),
                f"**{policy}**" if policy == OURS else str(policy),
                rp.fmt(make),
                rp.fmt(rp.mean(r, "makespan_s") / rp.mean(r, "lower_bound_s"), 3),
                rp.fmt(make / rp.mean(plans, "planner_s"), 3),
                rp.fmt(make / optimum, 3),
                rp.fmt(rp.mean(r, "loads_per_100") * float(str(jobs)) / 100, 1),
            ]
        )
    note = (
        "Lower bound: a linear program (every job on the cards best for its kind, plus one load "
        "from disk of every model no card holds) and the longest single job. Planner: the best of "
        "three annealed local searches over job-to-card assignments (each card runs its models in "
        "blocks). Optimum: every assignment tried (small batch only)."
    )
    rp.write(
        "sim_batch.md", command, "Bursts: jobs submitted at once", [note, rp.table(header, body)]
    )


def _learned(args: argparse.Namespace, command: str) -> None:
    rows = ex.run_all(ex.learned(args.jobs or 10000, args.seeds or 3), args.processes)
    header = ("policy", "load", "speeds", "stable", "p50 s", "p95 s", "good %", "loads/100")
    body = [
        [
            str(policy),
            str(load),
            "learned online" if was_learned else "fitted to the true costs",
            rp.stable_cell(r),
            rp.fmt(rp.mean(r, "p50_s")),
            rp.fmt(rp.mean(r, "p95_s")),
            rp.fmt(100 * rp.mean(r, "good_fraction")),
            rp.fmt(rp.mean(r, "loads_per_100")),
        ]
        for (policy, load, was_learned), r in sorted(
            rp.by(rows, "policy", "load", "learned").items(), key=str
        )
    ]
    note = (
        "Learned: `gateway.learning.speed`, seeded as the gateway's warm-up seeds it (a speed "
        "probe of each worker's first checkpoint; other families from their first warm job) and "
        "fed every warm job's seconds (jobs that loaded teach no speed). Fitted: a least-squares "
        "fit of the same model (fixed + work / speed) to the true warm times of the trace's job "
        "shapes, with the true load seconds for the tier a model would load from. Learned also "
        "learns load seconds as the gateway does (`gateway.learning.learn`: the warm-up's cold "
        "read "
        "first, then measured loads)."
    )
    rp.write(
        "sim_learned.md", command, "Learned against fitted speeds", [note, rp.table(header, body)]
    )


def _run(args: argparse.Namespace) -> None:
    scenario = Scenario(
        farm=args.farm,
        k=args.k,
        zipf_s=args.zipf,
        load=args.load,
        jobs=args.jobs or 2000,
        arrival=args.arrival,
        seed=args.seed,
    )
    for policy in args.policy.split(","):
        outcome = simulate(scenario, policy)
        print(policy, outcome.summary)


EXPERIMENTS = {
    "standard": _standard,
    "stability": _stability,
    "cheap": _cheap,
    "traces": _traces,
    "farms": _farms,
    "batch": _batch,
    "learned": _learned,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sim", description=__doc__)
    parser.add_argument("experiment", choices=[*EXPERIMENTS, "run", "all"])
    parser.add_argument(
        "--seeds", type=int, default=0, help="seeds per point (default per experiment)"
    )
    parser.add_argument("--jobs", type=int, default=0, help="jobs per run (default per experiment)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--policy", default=OURS, help="run: comma-separated policies")
    parser.add_argument("--farm", default="standard")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--arrival", default="poisson")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.k < 1 or args.load <= 0 or args.jobs < 0 or args.seeds < 0:
        parser.error("--k takes at least 1, --load more than 0, --jobs and --seeds 0 or more")
    if args.experiment == "run":
        try:
            _run(args)
        except ValueError as exc:  # an unknown farm, profile, flag, policy or arrival pattern
            parser.error(str(exc))
        return 0
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    for name in names:
        command = "python -m bench.sim " + " ".join([name, *_flags(args)])
        EXPERIMENTS[name](args, command)
        print(f"wrote bench/results/sim_{name}.md", file=sys.stderr)
    return 0


def _flags(args: argparse.Namespace) -> list[str]:
    out = []
    if args.seeds:
        out += ["--seeds", str(args.seeds)]
    if args.jobs:
        out += ["--jobs", str(args.jobs)]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
