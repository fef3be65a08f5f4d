"""A simulated farm through the real gateway, side by side with the simulator.

For each case and policy: `comfy-gateway serve` with one farm file of emulated workers
(`--farm`, by default the simulator's standard farm: 2 `h200` + 2 `rtx4070ti`; classic cache;
each warmed up with the checkpoint the simulator starts it with, or, with `--fresh`, nothing
preloaded, as `serve` starts a farm), its embedded Redis, every worker a real emulator process,
at `--time-scale`. A case is a trace of `bench.sim.scenario.trace` (`--k` checkpoints, Zipf
s = 1): `poissonNN`, Poisson arrivals at NN % of the all-warm capacity (`--jobs` jobs);
`batchNNN`, NNN jobs at once; `sequentialNN`, one client sending NN jobs one after another
(each a think time of 0-5 s after the last finished); `burstsKxR`, R rounds of K jobs sent at
once, each round a think time after the last one finished. It is replayed at the same scale
from one WebSocket client (a batch posted one prompt after another, as a client sends one);
latencies are read on the client and converted back to unscaled seconds. A load is a job whose
loader node ran (not listed by `execution_cached`). The simulator runs the same jobs with the
gateway's dispatch and, by default, with speeds learned online as the gateway learns them.
With `--out FILE.md`, `FILE.png` beside it plots ours / the best baseline per cell
(`bench.live_plot`).

    python -m bench.live [--cases poisson50,poisson80,batch500] [--jobs 300] [--seeds 0,1,2]
                         [--time-scale 0.25] [--farm standard] [--k 8] [--fresh] [--out FILE]

The quick start's farm and cases (two rtx4070ti workers, nothing preloaded, four checkpoints):

    python -m bench.live --farm 2*rtx4070ti --k 4 --fresh --cases sequential30,bursts4x8,batch16
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import connect

from bench import live_plot
from bench.sim.bounds import warm_best_s
from bench.sim.engine import SimConfig, Simulator
from bench.sim.farm import parse_farm
from bench.sim.metrics import SLO_FACTOR, SLO_SLACK_S, summarise
from bench.sim.scenario import Scenario, build_policy, cards_of, initial_models, trace
from bench.sim.trace import SimJob, catalogue
from gateway.scheduler import settle
from gateway.scheduler.policy import slots_per_worker
from gateway.serve import serve_argv
from workers.readiness import NotReady, Pacing, await_until
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess
from workers.warmup.prompts import LATENT, LOADER, SAMPLER, warmup_prompt

POLICIES = ("swarm_like", "ect_greedy", "affinity")
BOUNDED = "round_robin"


@dataclass
class Replay:
    """What the client saw of one run, in wall seconds."""

    sent_s: dict[str, float] = field(default_factory=dict)
    ended_s: dict[str, float] = field(default_factory=dict)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set whenever a job ends (a closed-loop client waits on it)."""
    loaded: set[str] = field(default_factory=set)
    job_of: dict[str, SimJob] = field(default_factory=dict)
    expected: int = 0
    all_ended: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class Measured:
    jobs: int
    finished: int
    mean_s: float
    p50_s: float
    p95_s: float
    loads_per_100: float
    goodput_per_s: float
    makespan_s: float
    """From the first job sent (arrived) to the last one's end."""


@dataclass(frozen=True)
class Farm:
    """The farm every case runs on: `bench.sim.farm.parse_farm`'s spec, K checkpoints, and
    whether it starts fresh (nothing preloaded) or with worker i holding the i-th most popular
    checkpoint."""

    spec: str = "standard"
    k: int = 8
    fresh: bool = False

    @property
    def described(self) -> str:
        start = "nothing preloaded" if self.fresh else "each worker warm on one checkpoint"
        return f"farm {self.spec} (classic cache, K = {self.k}, Zipf s = 1, {start})"


@dataclass(frozen=True)
class Case:
    """A trace shape: Poisson arrivals at `load`, a batch of `jobs`, or one client sending
    `jobs` in rounds of `burst` (one after another: rounds of 1)."""

    name: str
    arrival: str
    load: float = 0.8
    jobs: int = 0
    """A batch's or a client's jobs (Poisson cases take `--jobs`)."""
    burst: int = 1

    @property
    def closed(self) -> bool:
        """Each job (round) sent once the last one finished: the trace follows the farm."""
        return self.arrival in ("sequential", "bursts")

    @property
    def metrics(self) -> tuple[tuple[str, str], ...]:
        if self.arrival == "batch":
            return (("makespan s", "makespan_s"), ("p50 s", "p50_s"), LOADS)
        if self.closed:
            return (("mean s", "mean_s"), ("p95 s", "p95_s"), LOADS, ("makespan s", "makespan_s"))
        return (("p50 s", "p50_s"), ("p95 s", "p95_s"), LOADS, ("goodput/s", "goodput_per_s"))

    def scenario(self, jobs: int, seed: int, farm: Farm = Farm()) -> Scenario:
        base = Scenario(farm=farm.spec, k=farm.k, fresh=farm.fresh, seed=seed)
        if self.arrival == "poisson":
            return replace(base, jobs=jobs, load=self.load)
        return replace(base, jobs=self.jobs, arrival=self.arrival, burst=self.burst)

    @property
    def described(self) -> str:
        if self.arrival == "batch":
            return f"a batch of {self.jobs} jobs at once"
        if self.arrival == "sequential":
            return "one client sending them one after another (think time 0-5 s)"
        if self.arrival == "bursts":
            return f"one client sending rounds of {self.burst} at once (think time 0-5 s)"
        return f"Poisson arrivals at {self.load:.0%} of the all-warm capacity"


def parse_case(name: str) -> Case:
    """`poisson50` (any percentage), `batch500`, `sequential30` (any size) or `bursts4x8`
    (8 rounds of 4)."""
    for arrival in ("poisson", "batch", "sequential"):
        digits = name.removeprefix(arrival)
        if digits != name and digits.isdigit() and int(digits) > 0:
            if arrival == "poisson":
                return Case(name, arrival, load=int(digits) / 100)
            return Case(name, arrival, jobs=int(digits))
    size, _, rounds = name.removeprefix("bursts").partition("x")
    counts = [int(n) for n in (size, rounds) if n.isdigit()]
    if name.startswith("bursts") and len(counts) == 2 and min(counts) > 0:
        return Case(name, "bursts", jobs=counts[0] * counts[1], burst=counts[0])
    raise argparse.ArgumentTypeError(
        f"unknown case {name!r}: want poissonNN, batchNNN, sequentialNN or burstsKxR"
    )


def prompt_of(job: SimJob, seed: int) -> dict[str, Any]:
    shape = job.shape
    prompt = warmup_prompt(shape.checkpoint, shape.family, seed=seed)
    prompt[LATENT]["inputs"].update(width=shape.width, height=shape.height, batch_size=shape.batch)
    prompt[SAMPLER]["inputs"]["steps"] = shape.steps
    return prompt


def farm_file(scenario: Scenario, policy: str) -> str:
    names = [m.name for m in catalogue(scenario.k, scenario.zipf_s)]
    initial = initial_models(scenario)
    lines = [f'policy = "{policy}"', ""]
    for spec in parse_farm(scenario.farm):
        # The simulator's standard farm keeps one checkpoint per card: the classic cache
        # (the gateway would add --cache-lru 22 on an H200).
        args = list(spec.flags) or ["--cache-classic"]
        lines += [
            "[[workers]]",
            f'name = "{spec.name}"',
            f'emulate = "{spec.profile}"',
            f"checkpoints = {json.dumps(names)}",
            f"args = {json.dumps(args)}",
            f"preload = {json.dumps([initial[spec.name]] if spec.name in initial else [])}",
            "",
        ]
    return "\n".join(lines)


def start_gateway(root: Path, scenario: Scenario, policy: str, scale: float) -> ChildProcess:
    config = root / "farm.toml"
    config.write_text(farm_file(scenario, policy))
    port = free_port()
    flags = ("--time-scale", str(scale), "--log-level", "warning")
    argv = serve_argv(port, root / "data", *flags, config=config)
    env = {**os.environ, "COMFY_GATEWAY_HISTORY_MAX_ITEMS": "100000"}
    process = ChildProcess(argv, env=env, log_path=root / "gateway.log")
    process.start()
    return process


async def wait_ready(url: str, workers: int, timeout_s: float = 300) -> None:
    async with httpx.AsyncClient(timeout=2) as http:

        async def all_ready() -> bool:
            try:
                body = (await http.get(url + "/gateway/workers")).json()
            except (httpx.HTTPError, ValueError):
                return False
            rows = body.get("workers", body) if isinstance(body, dict) else body
            return sum(1 for w in rows if w.get("state") == "ready") >= workers

        try:
            await await_until(all_ready, timeout_s, pacing=Pacing(0.5, 1.0, 0.5))
        except NotReady as e:
            raise RuntimeError(f"{url}: the workers did not become ready") from e


async def listen(url: str, client_id: str, replay: Replay, opened: asyncio.Event) -> None:
    ws_url = url.replace("http://", "ws://") + f"/ws?clientId={client_id}"
    async with connect(ws_url, max_size=None) as socket:
        opened.set()
        async for message in socket:
            if isinstance(message, str):
                _event(json.loads(message), replay)


def _event(message: dict[str, Any], replay: Replay) -> None:
    data = message.get("data") or {}
    if message.get("type") != "executing" or not isinstance(data, dict):
        return
    prompt_id = str(data.get("prompt_id"))
    if data.get("node") is None:
        replay.ended_s.setdefault(prompt_id, time.monotonic())
        replay.ended.set()
        if len(replay.ended_s) >= replay.expected:
            replay.all_ended.set()
    elif str(data["node"]) == LOADER:
        replay.loaded.add(prompt_id)


async def ended_at(replay: Replay, prompt_ids: Sequence[str]) -> float:
    """When the last of these jobs ended (on the client's clock), once all have."""
    while not all(prompt_id in replay.ended_s for prompt_id in prompt_ids):
        replay.ended.clear()
        await replay.ended.wait()
    return max(replay.ended_s[prompt_id] for prompt_id in prompt_ids)


async def post(
    url: str, jobs: Sequence[SimJob], scale: float, client_id: str, replay: Replay
) -> None:
    """Send each job at its arrival, or, in a closed loop, its think time after the jobs it
    follows have ended."""
    start_s = time.monotonic()
    prompt_id_of: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for i, job in enumerate(jobs):
            due_s = start_s + job.arrival_s * scale
            if job.follows:
                last_s = await ended_at(replay, [prompt_id_of[j] for j in job.follows])
                due_s = last_s + job.think_s * scale
            delay_s = due_s - time.monotonic()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            sent_s = time.monotonic()
            body = {"prompt": prompt_of(job, i), "client_id": client_id}
            answer = (await http.post("/prompt", json=body)).json()
            prompt_id = prompt_id_of[job.job_id] = str(answer["prompt_id"])
            replay.sent_s[prompt_id], replay.job_of[prompt_id] = sent_s, job


async def replay_trace(url: str, jobs: Sequence[SimJob], scale: float, budget_s: float) -> Replay:
    """Replay the trace within `budget_s` of wall time; what was not sent or did not end by
    then counts as unfinished."""
    replay, opened, client_id = Replay(expected=len(jobs)), asyncio.Event(), uuid.uuid4().hex
    listener = asyncio.create_task(listen(url, client_id, replay, opened))
    await asyncio.wait_for(opened.wait(), 30)

    async def send_and_wait() -> None:
        await post(url, jobs, scale, client_id, replay)
        await replay.all_ended.wait()

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(send_and_wait(), budget_s)
    listener.cancel()
    return replay


def measure(replay: Replay, scenario: Scenario, scale: float) -> Measured:
    """Unscaled seconds; a job the replay never sent (its closed loop cut by the budget)
    counts as unfinished, with an infinite latency."""
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    ids = list(replay.sent_s)
    sent = np.array([replay.sent_s[i] for i in ids])
    ended = np.array([replay.ended_s.get(i, np.inf) for i in ids])
    unsent = max(replay.expected - len(ids), 0)
    latency = np.concatenate([(ended - sent) / scale, np.full(unsent, np.inf)])
    best = np.array([warm_best_s(cards, replay.job_of[i].shape) for i in ids] + [0.0] * unsent)
    done = np.isfinite(latency)
    first = float(sent.min()) if len(sent) else 0.0
    last = max([first, *sent, *ended[np.isfinite(ended)]])
    span_s = (last - first) / scale
    good = int(np.count_nonzero(latency <= SLO_FACTOR * best + SLO_SLACK_S))
    loads = len(replay.loaded & set(replay.ended_s))
    return Measured(
        jobs=len(latency),
        finished=int(done.sum()),
        mean_s=float(latency.mean()),
        p50_s=float(np.percentile(latency, 50, method="nearest")),
        p95_s=float(np.percentile(latency, 95, method="nearest")),
        loads_per_100=100.0 * loads / max(int(done.sum()), 1),
        goodput_per_s=good / max(span_s, 1e-9),
        makespan_s=span_s if done.all() else np.inf,
    )


async def run_live(scenario: Scenario, policy: str, scale: float, budget_s: float) -> Measured:
    jobs = trace(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gateway = start_gateway(root, scenario, policy, scale)
        try:
            url = f"http://127.0.0.1:{gateway.argv[gateway.argv.index('--port') + 1]}"
            await wait_ready(url, len(parse_farm(scenario.farm)))
            replay = await replay_trace(url, jobs, scale, budget_s)
        finally:
            gateway.terminate()
    return measure(replay, scenario, scale)


def sim_row(scenario: Scenario, policy: str, learned: bool, scale: float) -> Measured:
    """The simulator on the same jobs with the gateway's dispatch: late binders get 2 slots per
    worker (one running, one prefetched), early binders an unlimited queue, every worker on
    one host (one page cache) as `serve` starts them, arrivals settling as long (by the wall
    clock, at time scale `scale`) as the dispatcher lets them; `learned`: the policies see
    speeds learned online from the warm-up on, as the gateway's do."""
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    jobs = trace(scenario)
    families = {m.name: m.family for m in catalogue(scenario.k, scenario.zipf_s)}
    config = SimConfig(
        learned_speeds=learned,
        one_host=True,  # `serve`'s emulators share one
        settle_s=settle.SETTLE_S / scale,
        settle_cap_s=settle.SETTLE_CAP_S / scale,
    )
    chosen = build_policy(policy)
    slots = slots_per_worker(chosen, config.slots)
    sim = Simulator(chosen, cards, families, initial_models(scenario), config, slots)
    result = sim.run(jobs)
    summary = summarise(result, [warm_best_s(cards, job.shape) for job in jobs])
    return Measured(
        jobs=summary.jobs,
        finished=summary.finished,
        mean_s=summary.mean_s,
        p50_s=summary.p50_s,
        p95_s=summary.p95_s,
        loads_per_100=summary.loads_per_100,
        goodput_per_s=summary.goodput_per_s,
        makespan_s=summary.makespan_s if summary.finished == summary.jobs else np.inf,
    )


def mean(runs: Sequence[Measured]) -> Measured:
    """The mean of each measure over runs (seeds); an unfinished run's infinite p95 stays."""
    return Measured(
        jobs=sum(r.jobs for r in runs),
        finished=sum(r.finished for r in runs),
        mean_s=float(np.mean([r.mean_s for r in runs])),
        p50_s=float(np.mean([r.p50_s for r in runs])),
        p95_s=float(np.mean([r.p95_s for r in runs])),
        loads_per_100=float(np.mean([r.loads_per_100 for r in runs])),
        goodput_per_s=float(np.mean([r.goodput_per_s for r in runs])),
        makespan_s=float(np.mean([r.makespan_s for r in runs])),
    )


LOADS = ("loads/100", "loads_per_100")
Metrics = Sequence[tuple[str, str]]
Rows = Sequence[tuple[str, Measured, Measured]]


def _cells(live: Measured, sim: Measured, metrics: Metrics) -> list[str]:
    cells = []
    for _, key in metrics:
        a, b = getattr(live, key), getattr(sim, key)
        ratio = f"{a / b:.2f}" if b and np.isfinite(a) else "-"
        cells += [_fmt(a), _fmt(b), ratio]
    return cells


def _fmt(value: float) -> str:
    return f"{value:.2f}" if np.isfinite(value) else "inf"


def table(rows: Rows, metrics: Metrics) -> str:
    head = ["policy", "finished (live/sim)"]
    for label, _ in metrics:
        head += [f"{label} live", f"{label} sim", "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for policy, live, sim in rows:
        done = f"{live.finished}/{live.jobs} / {sim.finished}/{sim.jobs}"
        lines.append("| " + " | ".join([policy, done, *_cells(live, sim, metrics)]) + " |")
    return "\n".join(lines)


def order(rows: Rows, key: str, side: int) -> list[str]:
    """Policies from best to worst by `key` (latency: lowest first; goodput: highest first)."""
    sign = -1.0 if key == "goodput_per_s" else 1.0
    return [r[0] for r in sorted(rows, key=lambda r: sign * getattr(r[side], key))]


def agreement(rows: Rows, metrics: Metrics) -> str:
    within = [
        abs(getattr(live, key) / getattr(sim, key) - 1.0) <= 0.15
        for _, live, sim in rows
        for _, key in metrics
        if getattr(sim, key)
    ]
    same = 0
    orders = []
    for label, key in metrics:
        live, sim = order(rows, key, 1), order(rows, key, 2)
        same += live == sim
        orders.append(f"- {label}: live {', '.join(live)}; sim {', '.join(sim)}")
    return (
        f"{sum(within)} of {len(within)} cells within 15 % of the simulator; the same order on "
        f"{same} of {len(metrics)} measures. Order, best first:\n" + "\n".join(orders)
    )


async def run_case(case: Case, args: argparse.Namespace) -> str:
    seeds = [int(seed) for seed in args.seeds.split(",")]
    farm = Farm(args.farm, args.k, args.fresh)
    # round_robin's backlog grows without bound under open arrivals: a wall budget of its own,
    # and it is left out of the agreement. A closed loop cannot outrun the farm.
    bounded_policy = None if case.closed else BOUNDED
    rows, bounded = [], []
    for policy in [*args.policies.split(","), BOUNDED]:
        live_runs, sim_runs = [], []
        for seed in seeds:
            scenario = case.scenario(args.jobs, seed, farm)
            sim = sim_row(scenario, policy, not args.known_speeds, args.time_scale)
            span_s = sim.makespan_s if case.closed else trace(scenario)[-1].arrival_s
            budget_s = span_s * args.time_scale * 20 + 120
            if policy == bounded_policy or not np.isfinite(budget_s):
                budget_s = args.budget_s
            began = time.monotonic()
            live = await run_live(scenario, policy, args.time_scale, budget_s)
            took_s = time.monotonic() - began
            print(f"{case.name} {policy} seed {seed}: {live} in {took_s:.0f} s", file=sys.stderr)
            live_runs.append(live)
            sim_runs.append(sim)
        if policy == bounded_policy:
            bounded = live_runs
        rows.append((policy, mean(live_runs), mean(sim_runs)))
    jobs = case.jobs or args.jobs
    notes = f"Means over seeds {args.seeds} of {jobs} jobs each, {case.described}."
    agreeing = rows
    if bounded:
        agreeing = rows[:-1]
        notes += (
            f" {BOUNDED} ran within a {args.budget_s:.0f} s wall budget per seed: "
            + "; ".join(
                f"seed {seed}: {r.finished} of {r.jobs} finished, backlog {r.jobs - r.finished}"
                for seed, r in zip(seeds, bounded, strict=True)
            )
            + " (left out of the agreement)."
        )
    parts = [f"## {case.name}", table(rows, case.metrics), agreement(agreeing, case.metrics)]
    return "\n\n".join([*parts, notes])


async def run(args: argparse.Namespace) -> str:
    sections = [await run_case(case, args) for case in args.cases]
    knowledge = (
        "the speeds fitted to the true costs (`--known-speeds`)"
        if args.known_speeds
        else "speeds and load seconds learned online from the warm-up on, by the gateway's own "
        "learning code"
    )
    farm = Farm(args.farm, args.k, args.fresh)
    workers = len(parse_farm(args.farm))
    notes = (
        f"The {farm.described}, each trace replayed at time scale {args.time_scale} through "
        f"`comfy-gateway serve` (one farm file, {workers} emulator processes, embedded Redis); "
        "latencies and makespans in unscaled seconds. Goodput: jobs finished within 2 x their "
        "warm time on the fastest card + 10 s, per second. The simulator runs the same jobs "
        "with the gateway's dispatch (late binders hold 2 jobs per worker, one running and one "
        "prefetched; the early binders, ect_greedy and round_robin, send each job to a "
        "worker's queue on arrival), every worker on one host (one page cache), cold workers "
        f"warming up while idle as the dispatcher has them, and with {knowledge}."
    )
    return "\n\n".join([*sections, notes])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live")
    parser.add_argument(
        "--cases",
        type=lambda text: [parse_case(name) for name in text.split(",")],
        default=[parse_case("poisson80")],
        help="comma-separated: poissonNN (NN %% load), batchNNN (NNN jobs at once), "
        "sequentialNN (one after another), burstsKxR (R rounds of K at once)",
    )
    parser.add_argument("--farm", default="standard", help="bench.sim.farm spec, e.g. 2*rtx4070ti")
    parser.add_argument("--k", type=int, default=8, help="checkpoints in the catalogue")
    parser.add_argument(
        "--fresh", action="store_true", help="start every worker empty, as `serve` does"
    )
    parser.add_argument("--jobs", type=int, default=300, help="jobs of a Poisson case")
    parser.add_argument("--time-scale", dest="time_scale", type=float, default=0.25)
    parser.add_argument("--seeds", default="0", help="comma-separated trace seeds")
    parser.add_argument(
        "--known-speeds",
        dest="known_speeds",
        action="store_true",
        help="the simulator's policies know every speed (default: they learn them online)",
    )
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--budget-s", dest="budget_s", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    body = asyncio.run(run(args))
    command = "python -m bench.live " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"# Live gateway vs simulator\n\nMade by `{command.strip()}`.\n\n{body}\n"
    if args.out:
        args.out.write_text(text)
        cells = live_plot.judge(live_plot.parse(text))
        if cells:
            live_plot.plot(cells, args.out.with_suffix(".png"), command)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
