"""The cases a new user meets first, through the real gateway, one table per case.

For each policy and case: a fresh `comfy-gateway serve --policy NAME` with its defaults (two
emulated rtx4070ti workers offering the emulator's four checkpoints, embedded Redis, no
preload) in a fresh data dir, at `--time-scale`. One ComfyUI-style client posts to `/prompt`,
hears each job end on `/ws` (`executing` with node null) and reads `/history/{id}` (its
`gateway` block: worker, enqueued/started/finished stamps) and `/gateway/jobs/{id}` (the claim
stamp). Prompts are bench.live's (the warm-up graph at a drawn size, steps and batch).

1. `sequential`: six jobs over the four checkpoints (2 SD1.5, 2 SDXL), each sent when the
   previous one finished: worst and total queue wait (started - enqueued), total latency;
   then `learned.families` of `/gateway/workers`.
2. `mixed`: four jobs (the four checkpoints) posted at once on the two idle workers: makespan.
3. `burst`: 16 jobs over three checkpoints posted at once: makespan and loads.

Loads are the emulators' own counters (`/emulator/state`, every tier). "Waited with a worker
idle" adds, over jobs, the part of each queue wait during which some worker ran nothing.
Times are unscaled (emulated) seconds: wall seconds / time scale.

    python -m bench.quickstart [--time-scale 0.25] [--policies a,b] [--seeds 1]
        [--cases sequential,mixed,burst] [--out bench/results/quickstart.md]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from bench.live import prompt_of
from bench.sim.trace import Checkpoint, SimJob, draw_shape
from workers.comfy.families import family_of
from workers.readiness import NotReady, Pacing, await_until
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess
from workers.warmup.prompts import LOADER

POLICIES = ("affinity", "least_outstanding", "swarm_like", "round_robin")
DEFAULT_POLICY = "affinity"
WORKERS = 2
SD15_A, SD15_B = "v1-5-pruned-emaonly.safetensors", "dreamshaper_8.safetensors"
SDXL_A, SDXL_B = "sd_xl_base_1.0.safetensors", "juggernautXL_v9.safetensors"
"""The emulator's default catalogue (workers.emulator.config.DEFAULT_CHECKPOINTS)."""
IDLE_NOTE_S = 0.5
"""A job that waited longer than this (unscaled) while a worker was idle is listed."""
LOG_MARKS = ("ERROR", "CRITICAL", "Traceback", "WARNING")
STOP_GRACE_S = 30.0
READY_TIMEOUT_S = 120.0
START_TRIES = 2


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    picks: tuple[str, ...]
    sequential: bool = False
    shuffle: bool = False


CASES = (
    Case(
        "sequential",
        "1. Six jobs one after another over four checkpoints",
        (SD15_A, SDXL_A, SD15_B, SDXL_B, SD15_A, SDXL_A),
        sequential=True,
    ),
    Case(
        "mixed", "2. Four mixed jobs at once on two idle workers", (SD15_A, SDXL_A, SD15_B, SDXL_B)
    ),
    Case(
        "burst",
        "3. A burst of 16 jobs over three checkpoints",
        (SD15_A,) * 6 + (SD15_B,) * 5 + (SDXL_A,) * 5,
        shuffle=True,
    ),
)


@dataclass
class Job:
    """One job as the client saw it (monotonic wall seconds) and as the gateway recorded it."""

    prompt_id: str
    checkpoint: str
    sent_s: float
    ended_s: float | None = None
    status: str = "unknown"
    worker: str | None = None
    stamps_ms: dict[str, int] = field(default_factory=dict)
    loaded: bool = False
    why: dict[str, Any] | None = None
    """Why the policy sent its last attempt where it went (`placement` of `/gateway/jobs/{id}`:
    the reason, the expected finish there and on the runner-up)."""

    def stamp(self, name: str) -> int | None:
        return self.stamps_ms.get(name)


Span = tuple[int, int]


@dataclass
class Run:
    """One case under one policy and seed."""

    case: str
    policy: str
    seed: int
    scale: float
    jobs: list[Job]
    workers: list[str]
    loads: int | None
    learned: dict[str, Any] = field(default_factory=dict)
    log_lines: list[str] = field(default_factory=list)
    warm_ups: dict[str, Span] = field(default_factory=dict)
    """Each worker's warm-up while cold and idle (`/gateway/workers` `last_warm_up`): busy."""
    took_s: float = 0.0
    error: str | None = None
    start_failures: list[str] = field(default_factory=list)


class Client:
    """A ComfyUI-style client: one client id, one `/ws`, `POST /prompt`, `GET /history`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client_id = uuid.uuid4().hex
        self.http = httpx.AsyncClient(base_url=url, timeout=30)
        self.ended: dict[str, asyncio.Event] = {}
        self.ended_s: dict[str, float] = {}
        self.loaded: set[str] = set()
        self._socket: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        ws_url = self.url.replace("http://", "ws://") + f"/ws?clientId={self.client_id}"
        self._socket = await connect(ws_url, max_size=None, open_timeout=30)
        first = json.loads(await asyncio.wait_for(self._socket.recv(), 30))
        if first.get("type") != "status":
            raise RuntimeError(f"first /ws frame is not a status: {first}")
        self._reader = asyncio.create_task(self._read(self._socket))

    async def _read(self, socket: ClientConnection) -> None:
        with contextlib.suppress(Exception):
            async for message in socket:
                if isinstance(message, str):
                    self._event(json.loads(message))

    def _event(self, message: dict[str, Any]) -> None:
        data = message.get("data")
        if not isinstance(data, dict) or not data.get("prompt_id"):
            return
        prompt_id, kind = str(data["prompt_id"]), message.get("type")
        ended = kind in {"execution_error", "execution_interrupted"}
        if kind == "executing" and data.get("node") is None:
            ended = True
        elif kind == "executing" and str(data.get("node")) == LOADER:
            self.loaded.add(prompt_id)
        if ended:
            self.ended_s.setdefault(prompt_id, time.monotonic())
            self.ended.setdefault(prompt_id, asyncio.Event()).set()

    async def submit(self, prompt: dict[str, Any], checkpoint: str) -> Job:
        sent_s = time.monotonic()
        response = await self.http.post(
            "/prompt", json={"prompt": prompt, "client_id": self.client_id}
        )
        response.raise_for_status()
        prompt_id = str(response.json()["prompt_id"])
        self.ended.setdefault(prompt_id, asyncio.Event())
        return Job(prompt_id, checkpoint, sent_s)

    async def wait(self, job: Job, deadline_s: float) -> None:
        """Until the job's end is heard, or the wall deadline (monotonic) passes."""
        with contextlib.suppress(TimeoutError):
            timeout_s = max(deadline_s - time.monotonic(), 0.0)
            await asyncio.wait_for(self.ended[job.prompt_id].wait(), timeout_s)
        job.ended_s = self.ended_s.get(job.prompt_id)
        job.loaded = job.prompt_id in self.loaded

    async def record(self, job: Job) -> None:
        """The gateway's view: `/history/{id}` (status, `gateway` block), `/gateway/jobs/{id}`."""
        entry = (await self.http.get(f"/history/{job.prompt_id}")).json().get(job.prompt_id, {})
        block = entry.get("gateway") or {}
        job.status = str((entry.get("status") or {}).get("status_str") or block.get("state"))
        job.worker = block.get("worker")
        record = (await self.http.get(f"/gateway/jobs/{job.prompt_id}")).json()
        attempts = record.get("attempts") or []
        job.why = attempts[-1].get("placement") if attempts else None
        for name in ("enqueued", "claimed", "started", "finished"):
            value = block.get(f"{name}_at_ms") or record.get(f"{name}_at_ms")
            if value is not None:
                job.stamps_ms[name] = int(value)
        # The worker's own clock: when its ComfyUI began and ended the prompt, as it reported.
        for kind, data in (entry.get("status") or {}).get("messages") or []:
            stamp = data.get("timestamp") if isinstance(data, dict) else None
            stamp_name = _WORKER_STAMPS.get(kind)
            if stamp_name is not None and isinstance(stamp, int | float):
                job.stamps_ms[stamp_name] = int(stamp)

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 15)
        await self.http.aclose()


_WORKER_STAMPS = {"execution_start": "worker_start", "execution_success": "worker_end"}


def shapes(case: Case, seed: int) -> list[SimJob]:
    """The case's jobs for a seed: sizes, steps and batches drawn as bench.sim's traces draw
    them; the burst's order shuffled."""
    rng = np.random.default_rng(seed)
    picks = list(case.picks)
    if case.shuffle:
        random.Random(seed).shuffle(picks)
    return [
        SimJob(f"{case.name}{i:02d}", 0.0, draw_shape(rng, Checkpoint(name, family_of(name), 1.0)))
        for i, name in enumerate(picks)
    ]


async def drive(client: Client, case: Case, seed: int, deadline_s: float) -> list[Job]:
    """Send the case's jobs: one after another (each when the previous ended), or all at once."""
    jobs: list[Job] = []
    for i, sim in enumerate(shapes(case, seed)):
        job = await client.submit(prompt_of(sim, seed * 1000 + i), sim.shape.checkpoint)
        jobs.append(job)
        if case.sequential:
            await client.wait(job, deadline_s)
    for job in jobs:
        await client.wait(job, deadline_s)
    for job in jobs:
        await client.record(job)
    return jobs


def gateway_argv(root: Path, policy: str, scale: float, port: int) -> list[str]:
    """`comfy-gateway serve` with its defaults but for the port, data dir, scale and policy."""
    script = Path(sys.executable).with_name("comfy-gateway")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "gateway"]
    return [*head, "serve", "--port", str(port), "--data-dir", str(root / "data"),
            "--time-scale", str(scale), "--policy", policy]  # fmt: skip


async def _get(http: httpx.AsyncClient, url: str) -> Any:
    return (await http.get(url)).json()


async def farm_view(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        body = await _get(http, url + "/gateway/workers")
    rows: list[dict[str, Any]] = body.get("workers", []) if isinstance(body, dict) else body
    return rows


async def emulator_loads(rows: Sequence[dict[str, Any]]) -> int | None:
    """Checkpoint loads of every tier the emulators counted, or None if one cannot be read."""
    total = 0
    async with httpx.AsyncClient(timeout=10) as http:
        for row in rows:
            try:
                state = await _get(http, str(row["url"]) + "/emulator/state")
            except (httpx.HTTPError, ValueError, KeyError):
                return None
            total += sum(int(n) for n in state["counters"]["loads"].values())
    return total


async def learned_families(url: str, wait_s: float = 3.0) -> dict[str, Any]:
    """`learned.families` per worker, polled a little: learning follows the job's end."""
    deadline = time.monotonic() + wait_s
    while True:
        rows = await farm_view(url)
        learned = {str(r["name"]): (r.get("learned") or {}).get("families", {}) for r in rows}
        if any(learned.values()) or time.monotonic() > deadline:
            return learned
        await asyncio.sleep(0.2)


def scan_logs(root: Path) -> list[str]:
    """Warnings, errors and tracebacks of the gateway's log and each worker's log."""
    found = []
    logs = [root / "gateway.log", *sorted((root / "data" / "workers").glob("*/worker.log"))]
    for path in logs:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if any(mark in line for mark in LOG_MARKS):
                found.append(
                    f"{path.parent.name if path.name == 'worker.log' else 'gateway'}: {line}"
                )
    return found


async def observe(url: str, case: Case, seed: int, scale: float) -> Run:
    client = Client(url)
    await client.open()
    try:
        jobs = await drive(client, case, seed, time.monotonic() + 30 + 400 * scale)
    finally:
        await client.close()
    rows = await farm_view(url)
    learned = await learned_families(url) if case.sequential else {}
    names = [str(r["name"]) for r in rows]
    warm_ups = {
        str(r["name"]): (int(w["started_ms"]), int(w["ended_ms"]))
        for r in rows
        if (w := r.get("last_warm_up")) and w.get("ended_ms") is not None
    }
    loads = await emulator_loads(rows)
    return Run(case.name, "", seed, scale, jobs, names, loads, learned, warm_ups=warm_ups)


class StartError(RuntimeError):
    """The gateway exited, or its workers were not all ready in time."""


async def wait_ready(gateway: ChildProcess, url: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    async def all_ready() -> bool:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            return sum(1 for r in await farm_view(url) if r.get("state") == "ready") >= WORKERS
        return False

    def gone() -> str | None:
        return (
            None
            if gateway.running
            else f"the gateway exited with {gateway.returncode} before ready"
        )

    try:
        await await_until(all_ready, timeout_s, gone=gone, pacing=Pacing(0.25, 1.0, 0.25))
    except NotReady as e:
        reason = e.reason if e.exited else f"the workers were not ready after {timeout_s:.0f} s"
        raise StartError(reason) from e


def log_tail(root: Path, lines: int = 15) -> list[str]:
    path = root / "gateway.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return [f"gateway: {line}" for line in text.splitlines()[-lines:]]


async def attempt(case: Case, policy: str, seed: int, scale: float) -> Run:
    """One fresh gateway in a fresh data dir, the case's jobs through it, then its logs."""
    with tempfile.TemporaryDirectory(prefix="quickstart-") as tmp:
        root, port = Path(tmp), free_port()
        argv = gateway_argv(root, policy, scale, port)
        gateway = ChildProcess(argv, log_path=root / "gateway.log")
        gateway.start()
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                await wait_ready(gateway, url)
            except StartError as exc:
                raise StartError("\n".join([str(exc), *log_tail(root)])) from None
            run = await observe(url, case, seed, scale)
        finally:
            gateway.terminate(STOP_GRACE_S)
        run.log_lines = scan_logs(root)
    return run


async def run_case(case: Case, policy: str, seed: int, scale: float) -> Run:
    """`attempt`, once more if the gateway did not start (the failure is kept as a finding)."""
    began, failures = time.monotonic(), []
    for _ in range(START_TRIES):
        try:
            run = await attempt(case, policy, seed, scale)
            break
        except StartError as exc:
            print(f"{policy} {case.name} seed {seed}: {exc}", file=sys.stderr)
            failures.append(str(exc).splitlines()[0])
    else:
        run = Run(case.name, policy, seed, scale, [], [], None, error=failures[-1])
    run.start_failures = failures
    run.policy, run.took_s = policy, time.monotonic() - began
    return run


# Measures, in unscaled seconds.


def wait_s(job: Job, scale: float) -> float | None:
    """Queue wait: from enqueued to the worker's execution_start."""
    enqueued, started = job.stamp("enqueued"), job.stamp("started")
    if enqueued is None or started is None:
        return None
    return (started - enqueued) / 1000 / scale


def claim_s(job: Job, scale: float) -> float | None:
    """From enqueued to claimed (bound to a worker)."""
    enqueued, claimed = job.stamp("enqueued"), job.stamp("claimed")
    if enqueued is None or claimed is None:
        return None
    return (claimed - enqueued) / 1000 / scale


def waits_s(run: Run) -> list[float]:
    return [w for w in (wait_s(job, run.scale) for job in run.jobs) if w is not None]


def latencies_s(run: Run) -> list[float]:
    return [(j.ended_s - j.sent_s) / run.scale for j in run.jobs if j.ended_s is not None]


def makespan_s(run: Run) -> float:
    if not run.jobs or any(j.ended_s is None for j in run.jobs):
        return float("inf")
    last = max(j.ended_s for j in run.jobs if j.ended_s is not None)
    return (last - min(j.sent_s for j in run.jobs)) / run.scale


def finished(run: Run) -> int:
    return sum(1 for j in run.jobs if j.ended_s is not None and j.status == "success")


def busy_spans(run: Run) -> dict[str, list[Span]]:
    """Each worker's running intervals (started..finished stamps of the jobs it ran, and its
    warm-up)."""
    spans: dict[str, list[Span]] = {name: [] for name in run.workers}
    for name, span in run.warm_ups.items():
        spans.setdefault(name, []).append(span)
    for job in run.jobs:
        started, ended = job.stamp("started"), job.stamp("finished")
        if job.worker is not None and started is not None and ended is not None:
            spans.setdefault(job.worker, []).append((started, ended))
    return spans


def union(spans: Sequence[Span]) -> list[Span]:
    """The spans merged into disjoint ones: an early binder's worker holds jobs queued in
    ComfyUI, whose started..finished stamps overlap."""
    out: list[Span] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    out = []
    for a0, a1 in a:
        for b0, b1 in b:
            lo, hi = max(a0, b0), min(a1, b1)
            if lo < hi:
                out.append((lo, hi))
    return out


def idle_wait_ms(job: Job, all_busy: Sequence[Span]) -> int:
    """The part of a job's queue wait when not every worker was busy."""
    enqueued, started = job.stamp("enqueued"), job.stamp("started")
    if enqueued is None or started is None or started <= enqueued:
        return 0
    covered = sum(hi - lo for lo, hi in intersect([(enqueued, started)], all_busy))
    return started - enqueued - covered


def idle_waits_s(run: Run) -> list[float]:
    """Per job: seconds it waited while some worker ran nothing (each worker's busy spans
    merged, so pairwise intersection gives the time every worker was busy)."""
    spans = [union(worker) for worker in busy_spans(run).values()]
    all_busy = spans[0] if spans else []
    for other in spans[1:]:
        all_busy = intersect(all_busy, other)
    return [idle_wait_ms(job, all_busy) / 1000 / run.scale for job in run.jobs]


def measures(run: Run) -> dict[str, float]:
    if run.error is not None:
        return dict.fromkeys(MEASURES, float("nan")) | {"finished": 0, "makespan": float("inf")}
    waits, latencies = waits_s(run), latencies_s(run)
    return {
        "finished": finished(run),
        "worst_wait": max(waits, default=float("nan")),
        "total_wait": sum(waits),
        "total_latency": sum(latencies) if len(latencies) == len(run.jobs) else float("inf"),
        "makespan": makespan_s(run),
        "loads": float("nan") if run.loads is None else run.loads,
        "client_loads": sum(1 for j in run.jobs if j.loaded),
        "idle_wait": sum(idle_waits_s(run)),
    }


MEASURES = ("finished", "worst_wait", "total_wait", "total_latency", "makespan", "loads",
            "client_loads", "idle_wait")  # fmt: skip
ROWS = {
    "sequential": (("finished", "finished"), ("worst queue wait s", "worst_wait"),
                   ("total queue wait s", "total_wait"), ("total latency s", "total_latency"),
                   ("loads", "loads"), ("waited with a worker idle s", "idle_wait")),
    "mixed": (("finished", "finished"), ("makespan s", "makespan"), ("loads", "loads"),
              ("worst queue wait s", "worst_wait"), ("waited with a worker idle s", "idle_wait")),
    "burst": (("finished", "finished"), ("makespan s", "makespan"), ("loads", "loads"),
              ("worst queue wait s", "worst_wait"), ("waited with a worker idle s", "idle_wait")),
}  # fmt: skip


def combine(runs: Sequence[Run]) -> dict[str, float]:
    """Over seeds: finished summed, worst wait the worst, the rest means."""
    each = [measures(run) for run in runs]
    out = {key: float(np.mean([m[key] for m in each])) for key in each[0]}
    out["finished"] = sum(m["finished"] for m in each)
    out["worst_wait"] = max(m["worst_wait"] for m in each)
    return out


def _fmt(key: str, value: float, jobs: int) -> str:
    if key == "finished":
        return f"{value:.0f}/{jobs}"
    if key in {"loads", "client_loads"}:
        return "?" if np.isnan(value) else f"{value:.3g}"
    if np.isnan(value):
        return "-"
    return f"{value:.2f}" if np.isfinite(value) else "inf"


def table(case: Case, results: dict[str, dict[str, float]], seeds: int) -> str:
    policies = list(results)
    lines = [
        "| measure | " + " | ".join(policies) + " |",
        "| --- |" + " ---: |" * len(policies),
    ]
    for label, key in ROWS[case.name]:
        cells = [_fmt(key, results[p][key], len(case.picks) * seeds) for p in policies]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def learned_lines(policy: str, runs: Sequence[Run]) -> list[str]:
    lines = []
    for run in runs:
        families = json.dumps(run.learned, sort_keys=True) if any(run.learned.values()) else "EMPTY"
        lines.append(f"- {policy}, seed {run.seed}: `{families}`")
    return lines


def verdicts(by_case: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """The two questions: does affinity start a lone job at once, and are its makespans no
    worse than the best baseline's."""
    out = []
    sequential = by_case.get("sequential", {})
    if DEFAULT_POLICY in sequential:
        worst = sequential[DEFAULT_POLICY]["worst_wait"]
        verdict = "yes" if worst < 1.0 else "NO"
        out.append(
            f"- case 1: {DEFAULT_POLICY} worst queue wait {worst:.2f} s (under 1 s: {verdict})"
        )
    for number, name in ((2, "mixed"), (3, "burst")):
        results = by_case.get(name, {})
        baselines = {p: r["makespan"] for p, r in results.items() if p != DEFAULT_POLICY}
        if DEFAULT_POLICY not in results or not baselines:
            continue
        best = min(baselines, key=lambda p: baselines[p])
        ratio = results[DEFAULT_POLICY]["makespan"] / baselines[best]
        verdict = "yes" if ratio <= 1.0 else "NO"
        out.append(
            f"- case {number}: {DEFAULT_POLICY} makespan {ratio:.2f}x the best baseline's "
            f"({best}, {baselines[best]:.2f} s; no worse: {verdict})"
        )
    return out


def oddities(runs: Sequence[Run]) -> list[str]:
    """Jobs that waited while a worker was idle, unfinished jobs, load counts that disagree,
    and log warnings or errors."""
    out = []
    for run in runs:
        where = f"{run.policy} / {run.case} / seed {run.seed}"
        out += [f"- {where}: the gateway did not start: {why}" for why in run.start_failures]
        for i, (job, idle) in enumerate(zip(run.jobs, idle_waits_s(run), strict=True)):
            if idle > IDLE_NOTE_S:
                out.append(f"- {where}: job {i} ({job.checkpoint}, on {job.worker}) waited "
                           f"{idle:.2f} s while a worker was idle")  # fmt: skip
            if job.ended_s is None or job.status != "success":
                out.append(f"- {where}: job {i} ({job.checkpoint}) ended {job.status}")
        seen = sum(1 for j in run.jobs if j.loaded) + len(run.warm_ups)  # a warm-up loads one
        if run.loads is not None and run.loads != seen:
            out.append(
                f"- {where}: emulators counted {run.loads} loads, the client and the warm-ups "
                f"{seen}"
            )
        out += [f"- {where}: log: {line.strip()[:300]}" for line in run.log_lines]
    return out


def job_lines(run: Run) -> list[str]:
    """One line per job: checkpoint, worker, wait and latency, for the stderr trail."""
    lines = []
    for i, job in enumerate(run.jobs):
        wait = wait_s(job, run.scale)
        latency = (job.ended_s - job.sent_s) / run.scale if job.ended_s is not None else None
        lines.append(f"    {i:2d} {job.checkpoint:34s} {job.worker!s:6s} wait {_num(wait)} "
                     f"(claimed after {_num(claim_s(job, run.scale))}) latency {_num(latency)} "
                     f"loaded {job.loaded}")  # fmt: skip
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


async def run_all(args: argparse.Namespace) -> tuple[str, bool]:
    cases = [c for c in CASES if c.name in args.cases.split(",")]
    policies = args.policies.split(",")
    runs: list[Run] = []
    for policy in policies:
        for case in cases:
            for seed in range(args.seeds):
                run = await run_case(case, policy, seed, args.time_scale)
                print(f"{policy} {case.name} seed {seed}: {run.took_s:.0f} s wall, "
                      f"{measures(run)}", file=sys.stderr)  # fmt: skip
                print("\n".join(job_lines(run)), file=sys.stderr)
                runs.append(run)
    return report(args, cases, policies, runs)


def report(
    args: argparse.Namespace, cases: Sequence[Case], policies: Sequence[str], runs: Sequence[Run]
) -> tuple[str, bool]:
    by_case: dict[str, dict[str, dict[str, float]]] = {}
    parts = []
    for case in cases:
        by_case[case.name] = {
            p: combine([r for r in runs if r.case == case.name and r.policy == p]) for p in policies
        }
        parts.append(f"## {case.title}\n\n{table(case, by_case[case.name], args.seeds)}")
        if case.sequential:
            learned = [line for p in policies for line in learned_lines(p, _of(runs, case, p))]
            parts.append(
                "`learned.families` of /gateway/workers after case 1:\n\n" + "\n".join(learned)
            )
    odd = oddities(runs)
    parts.append("## Verdicts\n\n" + "\n".join(verdicts(by_case) or ["- (affinity not run)"]))
    parts.append("## Oddities\n\n" + ("\n".join(odd) if odd else "- none"))
    complete = all(finished(r) == len(r.jobs) for r in runs) and all(
        any(r.learned.values()) for r in runs if r.case == "sequential"
    )
    return "\n\n".join(parts), complete


def _of(runs: Sequence[Run], case: Case, policy: str) -> list[Run]:
    return [r for r in runs if r.case == case.name and r.policy == policy]


NOTES = (
    "Each policy and case ran on a fresh `comfy-gateway serve --policy NAME` (two emulated "
    "rtx4070ti workers, embedded Redis, no preload, a fresh data dir) at time scale {scale}; "
    "times are unscaled seconds (wall / {scale}). Queue wait: started - enqueued, from the "
    "`gateway` block of `/history/{{id}}`; latency and makespan: from the client's POST to the "
    "`executing` null it heard on `/ws`. Loads: the emulators' counters (`/emulator/state`), "
    "a cold worker's warm-up included (the worker the first job did not go to warms up on a "
    "checkpoint clients asked for while idle, `gateway.scheduler.warming`). "
    "Waited with a worker idle: per job, the part of its queue wait during which some worker "
    "ran nothing (busy: from a job's start to its end stamp, or a warm-up), summed; it includes "
    "each "
    "dispatch's few wall milliseconds, scaled up by 1 / time scale; jobs over {idle} s are "
    "listed under Oddities. "
    "Seeds {seeds} (sizes, steps, batches and the burst's order): finished summed, worst queue "
    "wait the worst, other rows means. Checkpoints: {sd15a}, {sd15b} (SD1.5), {sdxla}, {sdxlb} "
    "(SDXL); the burst is 6 x {sd15a}, 5 x {sd15b}, 5 x {sdxla}."
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quickstart")
    parser.add_argument("--time-scale", dest="time_scale", type=float, default=0.25)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds (0, 1, ...)")
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--out", type=Path, default=Path("bench/results/quickstart.md"))
    args = parser.parse_args(argv)
    began = time.monotonic()
    body, complete = asyncio.run(run_all(args))
    command = "python -m bench.quickstart " + " ".join(sys.argv[1:] if argv is None else argv)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    seeds = ", ".join(map(str, range(args.seeds)))
    names = {"sd15a": SD15_A, "sd15b": SD15_B, "sdxla": SDXL_A, "sdxlb": SDXL_B}
    notes = NOTES.format(scale=args.time_scale, idle=IDLE_NOTE_S, seeds=seeds, **names)
    took = f"The whole run took {time.monotonic() - began:.0f} s of wall time."
    head = f"# Quick-start cases through the gateway\n\nMade by `{command.strip()}` on {today}."
    text = f"{head}\n\n{notes} {took}\n\n{body}\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
