"""Real ComfyUI on real GPUs behind the gateway: every policy on a fresh gateway, in one run.

Given a ComfyUI checkout, it makes the checkpoints it needs (random weights in the real SD1.5
and SDXL layouts, with `--make-ckpt SCRIPT`; links for the other names, whose loads come from
the page cache) unless they are there, then for each policy starts `comfy-gateway serve` with
`--per-gpu` real ComfyUI workers on each GPU of `--gpus` (preload A), its embedded Redis, and
measures from one ComfyUI-style client (`/prompt`, `/ws`, `/history`):

- `first`: the first job after `serve` was ready (with preload; `--cold` adds a gateway
  without preload, whose first job loads; `--no-preload` runs every policy and case without
  preload, as `serve` starts by default, where an idle cold worker warms up on what the first
  jobs ask for; a policy given as `NAME:nowarm` runs with `warm_cold_workers = false`);
- `sequential`: six jobs one after another over four checkpoints (SD1.5 and SDXL);
- `burst`: four jobs over four checkpoints posted at once;
- `trace`: the 24-job 18:4:2 trace of bench/data/calibration (A, B, C, posted at once);
- `zipf`: SD1.5 and SDXL checkpoints drawn Zipf(1), Poisson arrivals;
- with the first policy only: `solo` (eight jobs one after another over A and X: warm and
  switch timings of one instance), `overhead` (tiny jobs through the gateway against the same jobs
  sent to a worker directly), `direct` (the 24-job trace on one ComfyUI directly, for scale),
  and `kill` (kill -9 of a worker mid-job: until the job is done, until the worker is back);
- `ab` (on a gateway of its own, after the policies): a real A/B experiment, the first worker
  of each GPU with ComfyUI's defaults (group `base`), the others with `--ab-flag` (group
  `variant`), SDXL jobs kept two in flight (so both groups always share the card alike) until
  the experiment's verdict calls a winner or `--ab-jobs` were sent; the report of
  `/gateway/ab` and the table of `comfy-gateway ab report` are kept.

Every prompt gets a fresh seed (identical prompts are cached whole by ComfyUI). Each job's
node transitions are recorded as the client heard them, so its phases (load, encode, sample,
decode) can be read from the JSON. `--budget-s` skips what no longer fits.

    python -m bench.real_gpu --comfyui DIR --make-ckpt make_ckpt.py [--gpus 0] [--per-gpu 2]
        [--policies affinity,swarm_like,...] [--cases first,sequential,...] [--budget-s 540]
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.live import wait_ready
from bench.quickstart import Client, Job
from gateway.serve import serve_argv
from workers.comfy.families import family_of
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess
from workers.warmup.prompts import LATENT, SAMPLER, native_size_px, warmup_prompt

POLICIES = ("affinity", "swarm_like", "round_robin", "least_outstanding", "ect_greedy")
CASES = ("first", "sequential", "burst", "trace", "zipf", "solo", "overhead", "direct", "kill")
AB_CASE = "ab"
"""Run on a gateway of its own (two groups of launch args), not under each policy."""
AB_EXPERIMENT, AB_GROUPS = "attention", ("base", "variant")
AB_IN_FLIGHT = 2
AB_MIN_JOBS = 12
ONCE = ("solo", "overhead", "direct", "kill")
"""Cases measured under the first policy only: they do not depend on placement."""
A, B, C = "A.safetensors", "B.safetensors", "C.safetensors"
X, Y = "sdxl_X.safetensors", "sdxl_Y.safetensors"
KINDS = {A: ("sd15", 1), X: ("sdxl", 2)}
"""Checkpoints made with the script (kind, seed); the others link to one of them."""
LINKS = {B: A, C: A, Y: X}
SEQUENTIAL = (A, X, B, Y, A, X)
SOLO = (A, A, A, X, X, X, A, A)
"""One after another, for the single-instance timings: warm A, A to X, warm X, X to A."""
BURST = (A, X, B, Y)
TRACE = (A, A, B, A, A, A, A, A, A, A, A, A, A, B, A, A, B, C, A, A, C, A, B, A)
"""The 18:4:2 trace of bench/data/calibration/h200x2-comfyui-0.3.64.json, in its order."""
ZIPF = (A, X, B, Y, C)
ZIPF_JOBS, ZIPF_GAP_S = 16, 0.8
STEPS = 20
TINY_JOBS = 12
KILL_STEPS = 60
STAGES = {"1": "load", "2": "encode", "3": "encode", "4": "latent", "5": "sample", "6": "decode"}
READY_TIMEOUT_S = 240.0
CASE_TIMEOUT_S = 150.0
RESERVE_S = 40.0
"""Budget kept back for stopping the last gateway and writing the results."""


@dataclass
class Heard(Job):
    """A job with the node transitions its client heard: (node or None at the end, seconds
    since it was sent)."""

    nodes: list[tuple[str | None, float]] = field(default_factory=list)

    @property
    def latency_s(self) -> float | None:
        return None if self.ended_s is None else self.ended_s - self.sent_s

    def phases(self) -> dict[str, float]:
        """Seconds per stage between the transitions heard (cached nodes: none)."""
        out: dict[str, float] = {}
        for (node, at_s), (_, next_s) in zip(self.nodes, self.nodes[1:], strict=False):
            stage = STAGES.get(str(node), "other")
            out[stage] = round(out.get(stage, 0.0) + next_s - at_s, 4)
        return out


class Recorder(Client):
    """The quick-start client, also keeping each job's node transitions."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.heard: dict[str, Heard] = {}
        self.sampling: dict[str, asyncio.Event] = {}

    def _event(self, message: dict[str, Any]) -> None:
        super()._event(message)
        data = message.get("data")
        if message.get("type") != "executing" or not isinstance(data, dict):
            return
        job = self.heard.get(str(data.get("prompt_id")))
        if job is not None:
            node = data.get("node")
            job.nodes.append((None if node is None else str(node), time.monotonic() - job.sent_s))
            if str(node) == SAMPLER:
                self.sampling.setdefault(job.prompt_id, asyncio.Event()).set()

    async def send(self, checkpoint: str, seed: int, *, steps: int = STEPS, size: int = 0) -> Heard:
        job = await self.submit(txt2img(checkpoint, seed, steps, size), checkpoint)
        heard = Heard(job.prompt_id, checkpoint, job.sent_s)
        self.heard[job.prompt_id] = heard
        return heard

    async def finish(self, jobs: Sequence[Heard], deadline_s: float, *, gateway: bool) -> None:
        for job in jobs:
            await self.wait(job, deadline_s)
            if gateway:
                await self.record(job)


def txt2img(checkpoint: str, seed: int, steps: int = STEPS, size: int = 0) -> dict[str, Any]:
    """The standard txt2img graph at the family's native size (or `size`), `steps` euler steps."""
    family = family_of(checkpoint)
    prompt = warmup_prompt(checkpoint, family, seed=seed)
    side = size or native_size_px(family)
    prompt[LATENT]["inputs"].update(width=side, height=side)
    prompt[SAMPLER]["inputs"]["steps"] = steps
    return prompt


# -- checkpoints and processes ---------------------------------------------------------------


def make_checkpoints(comfyui: Path, script: Path | None) -> dict[str, float]:
    """Seconds it took to make each missing checkpoint (in parallel); links for the others."""
    folder = comfyui / "models" / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    started, making = time.monotonic(), {}
    for name, (kind, seed) in KINDS.items():
        if not (folder / name).exists():
            if script is None:
                raise SystemExit(f"{folder / name} is missing: pass --make-ckpt SCRIPT")
            argv = [sys.executable, str(script.resolve()), kind, str(folder / name), str(seed)]
            making[name] = subprocess.Popen(argv, cwd=comfyui, env=comfy_env(comfyui))
    took = {}
    for name, process in making.items():
        if process.wait() != 0:
            raise SystemExit(f"making {name} failed ({process.returncode})")
        took[name] = round(time.monotonic() - started, 1)
    for link, target in LINKS.items():
        if not (folder / link).exists():
            (folder / link).symlink_to(target)
    return took


def comfy_env(comfyui: Path) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{path}:{comfyui}" if path else str(comfyui)}


def farm_file(args: argparse.Namespace, policy: str, preload: bool, *, ab: bool = False) -> str:
    """`--per-gpu` real workers on each GPU, or as many emulated ones (`--emulate PROFILE`);
    `ab`: the A/B farm (first worker of each GPU in group `base`, the others in `variant`
    with `--ab-flag`, preload of the A/B checkpoint, the experiment)."""
    warm = [args.ab_ckpt] if ab else [A] if preload else []
    name, _, option = policy.partition(":")
    lines = [f'policy = "{name}"', f"preload = {json.dumps(warm)}"]
    if option == "nowarm":  # a cold worker is not warmed up while idle
        lines.append("warm_cold_workers = false")
    lines.append("")
    for gpu in args.gpus:
        for i in range(args.per_gpu):
            lines += ["[[workers]]", f'name = "g{gpu}w{i}"']
            extra = [args.ab_flag] if ab and i > 0 else []
            if ab:
                lines.append(f'group = "{AB_GROUPS[min(i, 1)]}"')
            if args.emulate:
                names = json.dumps([*KINDS, *LINKS])
                lines += [f'emulate = "{args.emulate}"', f"checkpoints = {names}"]
            else:
                lines.append(f"gpu = {gpu}")
            lines += [f"args = {json.dumps(extra)}", ""]
    if ab:
        lines += [
            "[[experiments]]",
            f'name = "{AB_EXPERIMENT}"',
            f"groups = {json.dumps(AB_GROUPS)}",
        ]
    return "\n".join(lines)


@dataclass
class Gateway:
    process: ChildProcess
    url: str
    root: Path
    ready_s: float


async def start_gateway(
    root: Path, args: argparse.Namespace, policy: str, *, preload: bool, ab: bool = False
) -> Gateway:
    config = root / "farm.toml"
    config.write_text(farm_file(args, policy, preload, ab=ab))
    port = free_port()
    argv = serve_argv(port, root / "data", "--log-level", "info", config=config)
    if args.emulate:
        argv += ["--time-scale", str(args.time_scale)]
    else:
        argv += ["--comfyui", str(args.comfyui)]
    process = ChildProcess(argv, env=dict(os.environ), log_path=root / "gateway.log")
    began = time.monotonic()
    process.start()
    url = f"http://127.0.0.1:{port}"
    await wait_ready(url, len(args.gpus) * args.per_gpu, READY_TIMEOUT_S)
    return Gateway(process, url, root, time.monotonic() - began)


async def workers_view(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as http:
        body = (await http.get(url + "/gateway/workers")).json()
    rows: list[dict[str, Any]] = body.get("workers", body) if isinstance(body, dict) else body
    return rows


def worker_summary(row: dict[str, Any]) -> dict[str, Any]:
    """What a worker's row says of its launch and of what the gateway learned."""
    keep = ("name", "state", "url", "pid", "args", "launch", "telemetry", "learned", "restarts")
    return {key: row[key] for key in keep if key in row}


# -- the cases ---------------------------------------------------------------------------------


class Seeds:
    def __init__(self, start: int) -> None:
        self.next = start

    def __call__(self) -> int:
        self.next += 1
        return self.next


def case_result(jobs: Sequence[Heard], began_s: float) -> dict[str, Any]:
    ended = [j.ended_s for j in jobs if j.ended_s is not None]
    latencies = [j.latency_s for j in jobs if j.latency_s is not None]
    return {
        "jobs": len(jobs),
        "finished": len(ended),
        "makespan_s": round(max(ended) - began_s, 3) if ended else None,
        "total_latency_s": round(sum(latencies), 3),
        "p50_s": _percentile(latencies, 50),
        "p95_s": _percentile(latencies, 95),
        "loads": sum(1 for j in jobs if j.loaded),
        "runs": [_job_row(j, began_s) for j in jobs],
    }


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q, method="nearest")), 3) if values else None


def _job_row(job: Heard, began_s: float) -> dict[str, Any]:
    return {
        "ckpt": job.checkpoint,
        "worker": job.worker,
        "sent_s": round(job.sent_s - began_s, 3),
        "latency_s": None if job.latency_s is None else round(job.latency_s, 3),
        "loaded": job.loaded,
        "phases": job.phases(),
        "stamps_ms": job.stamps_ms,
        "why": job.why,
    }


async def at_once(
    client: Recorder, picks: Sequence[str], seeds: Seeds, *, gateway: bool = True
) -> dict[str, Any]:
    began = time.monotonic()
    jobs = [await client.send(ckpt, seeds()) for ckpt in picks]
    await client.finish(jobs, began + CASE_TIMEOUT_S, gateway=gateway)
    return case_result(jobs, began)


async def one_by_one(client: Recorder, picks: Sequence[str], seeds: Seeds) -> dict[str, Any]:
    began, jobs = time.monotonic(), []
    for ckpt in picks:
        job = await client.send(ckpt, seeds())
        await client.finish([job], time.monotonic() + CASE_TIMEOUT_S, gateway=True)
        jobs.append(job)
    return case_result(jobs, began)


async def zipf(client: Recorder, seeds: Seeds, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(ZIPF) + 1)
    picks = rng.choice(len(ZIPF), size=ZIPF_JOBS, p=weights / weights.sum())
    gaps = rng.exponential(ZIPF_GAP_S, size=ZIPF_JOBS)
    began, jobs = time.monotonic(), []
    for pick, gap in zip(picks, np.cumsum(gaps), strict=True):
        await asyncio.sleep(max(began + float(gap) - time.monotonic(), 0.0))
        jobs.append(await client.send(ZIPF[int(pick)], seeds()))
    await client.finish(jobs, time.monotonic() + CASE_TIMEOUT_S, gateway=True)
    return case_result(jobs, began)


async def tiny_latencies(client: Recorder, seeds: Seeds, jobs: int) -> list[float]:
    """Latency of 64x64 one-step jobs on the resident checkpoint, one after another."""
    out = []
    for _ in range(jobs):
        job = await client.send(A, seeds(), steps=1, size=64)
        await client.wait(job, time.monotonic() + 60)
        if job.latency_s is not None:
            out.append(job.latency_s)
    return out


async def overhead(gateway: Gateway, client: Recorder, seeds: Seeds) -> dict[str, Any]:
    """The same tiny jobs through the gateway and sent to a worker directly, interleaved in
    rounds of four, so a slow phase of the machine hits both alike."""
    worker_url = (await workers_view(gateway.url))[0]["url"]
    direct = Recorder(worker_url)
    await direct.open()
    via, straight = [], []
    try:
        for _ in range(TINY_JOBS // 4):
            via += await tiny_latencies(client, seeds, 4)
            straight += await tiny_latencies(direct, seeds, 4)
    finally:
        await direct.close()
    via_p50, direct_p50 = _percentile(via, 50), _percentile(straight, 50)
    return {
        "jobs": len(via),
        "gateway_p50_s": via_p50,
        "direct_p50_s": direct_p50,
        "overhead_ms": (
            None
            if via_p50 is None or direct_p50 is None
            else round((via_p50 - direct_p50) * 1000, 1)
        ),
        "gateway_s": [round(v, 4) for v in via],
        "direct_s": [round(v, 4) for v in straight],
    }


async def direct_trace(gateway: Gateway, seeds: Seeds) -> dict[str, Any]:
    """The 24-job trace posted at once to one worker directly (the gateway idle)."""
    worker_url = (await workers_view(gateway.url))[0]["url"]
    direct = Recorder(worker_url)
    await direct.open()
    try:
        return await at_once(direct, TRACE, seeds, gateway=False)
    finally:
        await direct.close()


async def kill_mid_job(gateway: Gateway, client: Recorder, seeds: Seeds) -> dict[str, Any]:
    """A long SDXL job; once its sampler runs, kill -9 of its worker: seconds from the kill
    until the job is done (retried elsewhere) and until the worker is ready again."""
    job = await client.send(X, seeds(), steps=KILL_STEPS)
    sampling = client.sampling.setdefault(job.prompt_id, asyncio.Event())
    await asyncio.wait_for(sampling.wait(), 60)
    rows = {row["name"]: row for row in await workers_view(gateway.url)}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as http:
        record = (await http.get(f"/gateway/jobs/{job.prompt_id}")).json()
    victim = rows.get(str(record.get("worker")))
    if victim is None or not victim.get("pid"):
        return {"error": f"no running worker holds the job: {record}"}
    killed_s = time.monotonic()
    os.kill(int(victim["pid"]), signal.SIGKILL)
    await client.finish([job], killed_s + CASE_TIMEOUT_S, gateway=True)
    back_s = await _back(gateway.url, victim["name"], int(victim["pid"]), killed_s + 120)
    return {
        "killed_worker": victim["name"],
        "job_done_after_kill_s": None if job.ended_s is None else round(job.ended_s - killed_s, 2),
        "job_worker": job.worker,
        "job_status": job.status,
        "worker_back_after_kill_s": None if back_s is None else round(back_s - killed_s, 2),
    }


async def _back(url: str, name: str, old_pid: int, deadline_s: float) -> float | None:
    while time.monotonic() < deadline_s:
        rows = {row["name"]: row for row in await workers_view(url)}
        row = rows.get(name, {})
        if row.get("state") == "ready" and row.get("pid") not in (None, old_pid):
            return time.monotonic()
        await asyncio.sleep(0.25)
    return None


async def ab_report(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.get(url + "/gateway/ab", params={"experiment": AB_EXPERIMENT})
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


async def ab_jobs(
    gateway: Gateway, client: Recorder, seeds: Seeds, args: argparse.Namespace
) -> dict[str, Any]:
    """SDXL jobs kept `AB_IN_FLIGHT` in flight until the verdict calls a winner (after at
    least `AB_MIN_JOBS`) or `args.ab_jobs` were sent; the report after the last."""
    began = time.monotonic()
    jobs: list[Heard] = []
    flying: set[asyncio.Task[None]] = set()
    report: dict[str, Any] = {}
    while len(jobs) < args.ab_jobs and time.monotonic() < args.deadline_s - RESERVE_S:
        while len(flying) < AB_IN_FLIGHT and len(jobs) < args.ab_jobs:
            job = await client.send(args.ab_ckpt, seeds())
            jobs.append(job)
            flying.add(
                asyncio.create_task(
                    client.finish([job], time.monotonic() + CASE_TIMEOUT_S, gateway=True)
                )
            )
        _, flying = await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
        if len(jobs) >= AB_MIN_JOBS and len(jobs) % 2 == 0:
            report = await ab_report(gateway.url)
            if "is faster" in report.get("verdict", ""):
                break
    if flying:
        await asyncio.wait(flying)
    report = await ab_report(gateway.url)
    out = case_result(jobs, began)
    out.update(flag=args.ab_flag, checkpoint=args.ab_ckpt, verdict=report.get("verdict"),
               report=report, cli=_ab_cli(gateway.url))  # fmt: skip
    return out


def _ab_cli(url: str) -> str:
    """What `comfy-gateway ab report NAME` prints for the experiment."""
    argv = [
        sys.executable,
        "-m",
        "gateway",
        "ab",
        "report",
        AB_EXPERIMENT,
        "--url",
        url,
        "--no-plot",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + (done.stderr if done.returncode else "")


async def measure_ab(args: argparse.Namespace) -> dict[str, Any]:
    """The A/B case on a gateway of its own."""
    policy = args.policies[0]
    out: dict[str, Any] = {"policy": policy, "preload": True, "case": AB_CASE, "cases": {}}
    seeds = Seeds(int(time.time() * 1000) % 10**9)
    with tempfile.TemporaryDirectory() as tmp:
        gateway = await start_gateway(Path(tmp), args, policy, preload=True, ab=True)
        out["ready_s"] = round(gateway.ready_s, 2)
        out["workers_at_start"] = [worker_summary(r) for r in await workers_view(gateway.url)]
        client = Recorder(gateway.url)
        await client.open()
        try:
            out["cases"][AB_CASE] = await ab_jobs(gateway, client, seeds, args)
        finally:
            await client.close()
            gateway.process.terminate(grace_s=15)
            out["log_tail"] = _tail(gateway.root / "gateway.log")
    return out


# -- one policy --------------------------------------------------------------------------------


async def measure_policy(
    args: argparse.Namespace, policy: str, cases: Sequence[str], *, preload: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {"policy": policy, "preload": preload, "cases": {}}
    seeds = Seeds(int(time.time() * 1000) % 10**9)
    with tempfile.TemporaryDirectory() as tmp:
        gateway = await start_gateway(Path(tmp), args, policy, preload=preload)
        out["ready_s"] = round(gateway.ready_s, 2)
        out["workers_at_start"] = [worker_summary(r) for r in await workers_view(gateway.url)]
        client = Recorder(gateway.url)
        await client.open()
        try:
            for case in cases:
                if time.monotonic() > args.deadline_s - RESERVE_S:
                    out["skipped"] = [*out.get("skipped", []), case]
                    continue
                began = time.monotonic()
                out["cases"][case] = await run_case(case, gateway, client, seeds, args.seed)
                took = time.monotonic() - began
                print(f"  {policy} {case}: {took:.1f} s", file=sys.stderr, flush=True)
            out["workers_at_end"] = [worker_summary(r) for r in await workers_view(gateway.url)]
        finally:
            await client.close()
            gateway.process.terminate(grace_s=15)
            out["log_tail"] = _tail(gateway.root / "gateway.log")
    return out


async def run_case(
    case: str, gateway: Gateway, client: Recorder, seeds: Seeds, seed: int
) -> dict[str, Any]:
    cases = {
        "first": lambda: at_once(client, [A], seeds),
        "sequential": lambda: one_by_one(client, SEQUENTIAL, seeds),
        "burst": lambda: at_once(client, BURST, seeds),
        "trace": lambda: at_once(client, TRACE, seeds),
        "zipf": lambda: zipf(client, seeds, seed),
        "solo": lambda: one_by_one(client, SOLO, seeds),
        "overhead": lambda: overhead(gateway, client, seeds),
        "direct": lambda: direct_trace(gateway, seeds),
        "kill": lambda: kill_mid_job(gateway, client, seeds),
    }
    if case not in cases:
        raise ValueError(f"unknown case {case!r}; known: {', '.join(cases)}")
    return await cases[case]()


def _tail(path: Path, lines: int = 40) -> list[str]:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    marked = [line for line in text if "WARNING" in line or "ERROR" in line or "Traceback" in line]
    return marked[-lines:]


# -- the report --------------------------------------------------------------------------------


def table(runs: Sequence[dict[str, Any]]) -> str:
    head = ["policy", "ready s", "first s", "sequential total s", "burst makespan s",
            "trace makespan s (loads)", "zipf p50/p95 s", "learned sd15/sdxl units/s"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for run in runs:
        if run.get("case") == AB_CASE:
            continue  # its own farm: reported by once_lines
        cases = run["cases"]
        name = run["policy"] + ("" if run["preload"] else " (no preload)")
        if "file" in run:
            name = f"{run['file']}: {name}"
        lines.append(
            "| "
            + " | ".join(
                [
                    name,
                    _num(run.get("ready_s")),
                    _num(cases.get("first", {}).get("makespan_s")),
                    _num(cases.get("sequential", {}).get("total_latency_s")),
                    _num(cases.get("burst", {}).get("makespan_s")),
                    _trace_cell(cases.get("trace")),
                    _zipf_cell(cases.get("zipf")),
                    _learned_cell(run.get("workers_at_end", [])),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _trace_cell(case: dict[str, Any] | None) -> str:
    if not case:
        return "-"
    return f"{_num(case.get('makespan_s'))} ({case.get('loads')})"


def _zipf_cell(case: dict[str, Any] | None) -> str:
    if not case:
        return "-"
    return f"{_num(case.get('p50_s'))} / {_num(case.get('p95_s'))}"


def _learned_cell(rows: Sequence[dict[str, Any]]) -> str:
    cells = []
    for row in rows:
        families = (row.get("learned") or {}).get("families") or {}
        speeds = [families.get(f, {}).get("units_per_s") for f in ("sd15", "sdxl")]
        cells.append("/".join("-" if s is None else f"{s:.1f}" for s in speeds))
    return ", ".join(cells) or "-"


def once_lines(runs: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for run in runs:
        cases = run["cases"]
        if "overhead" in cases:
            o = cases["overhead"]
            lines.append(
                f"overhead: gateway p50 {o['gateway_p50_s']} s, direct p50 {o['direct_p50_s']} s,"
                f" +{o['overhead_ms']} ms per job ({o['jobs']} tiny jobs each)"
            )
        if "direct" in cases:
            d = cases["direct"]
            lines.append(f"direct: the 24-job trace on one ComfyUI {d['makespan_s']} s")
        if "kill" in cases:
            lines.append(f"kill -9: {json.dumps(cases['kill'])}")
        if AB_CASE in cases:
            ab = cases[AB_CASE]
            lines.append(
                f"A/B `{ab['flag']}` on {ab['checkpoint']}, {ab['jobs']} jobs: {ab['verdict']}"
            )
    return lines


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    made = {} if args.emulate else make_checkpoints(args.comfyui, args.make_ckpt)
    setup: dict[str, Any] = {"made_s": made}
    print(f"checkpoints: {setup}", file=sys.stderr, flush=True)
    plan = [(p, not args.no_preload) for p in args.policies]
    plan += [(args.policies[0], False)] if args.cold else []
    per_policy = [c for c in args.cases if c != AB_CASE]
    if not per_policy:
        plan = []
    for i, (policy, preload) in enumerate(plan):
        if time.monotonic() > args.deadline_s - RESERVE_S - 60:
            results.append({"policy": policy, "preload": preload, "cases": {}, "skipped": "budget"})
            continue
        every = preload or args.no_preload
        cases = [c for c in per_policy if i == 0 or c not in ONCE] if every else ["first"]
        try:
            results.append(await measure_policy(args, policy, cases, preload=preload))
        except Exception as exc:  # one policy failing must not lose the others' results
            results.append({"policy": policy, "preload": preload, "cases": {}, "error": repr(exc)})
        write_json(args, setup, results)
    if AB_CASE in args.cases:
        try:
            results.append(await measure_ab(args))
        except Exception as exc:  # keep what the policies measured
            results.append({"policy": args.policies[0], "preload": True, "case": AB_CASE,
                            "cases": {}, "error": repr(exc)})  # fmt: skip
        write_json(args, setup, results)
    return results


def write_json(
    args: argparse.Namespace, setup: dict[str, Any], results: list[dict[str, Any]]
) -> None:
    if args.json is None:
        return
    body = {"args": {k: str(v) for k, v in vars(args).items()}, "setup": setup, "runs": results}
    args.json.write_text(json.dumps(body, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_gpu")
    parser.add_argument("--comfyui", type=Path, default=None)
    parser.add_argument("--emulate", default=None, help="emulated workers of this profile")
    parser.add_argument("--time-scale", dest="time_scale", type=float, default=1.0)
    parser.add_argument("--make-ckpt", dest="make_ckpt", type=Path, default=None)
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--per-gpu", dest="per_gpu", type=int, default=2)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--cold", action="store_true", help="also a gateway without preload")
    parser.add_argument(
        "--no-preload", dest="no_preload", action="store_true",
        help="every policy's gateway without preload, as `serve` starts one (every case)",
    )  # fmt: skip
    parser.add_argument("--budget-s", dest="budget_s", type=float, default=540.0)
    parser.add_argument("--seed", type=int, default=0, help="the Zipf trace's draw")
    parser.add_argument("--ab-flag", dest="ab_flag", default="--use-split-cross-attention")
    parser.add_argument("--ab-ckpt", dest="ab_ckpt", default=X, help="the A/B jobs' checkpoint")
    parser.add_argument("--ab-jobs", dest="ab_jobs", type=int, default=40, help="at most")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.deadline_s = time.monotonic() + args.budget_s
    args.gpus = [int(g) for g in args.gpus.split(",")]
    args.policies = args.policies.split(",")
    args.cases = args.cases.split(",")
    if args.comfyui is None and args.emulate is None:
        parser.error("--comfyui DIR or --emulate PROFILE")
    args.comfyui = args.comfyui.resolve() if args.comfyui else None
    results = asyncio.run(run(args))
    print("\n".join(once_lines(results)))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
