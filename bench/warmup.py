"""First-job latency after a worker starts, with and without preload, against a warm job.

For each mode, `--runs` times: start `comfy-gateway serve` (embedded Redis, one emulated
rtx4070ti worker, time-scaled), wait until `/readyz` answers 200, then send one SDXL
1024x1024 20-step job (the first client job) and `--warm` more of the same checkpoint with other
seeds; each job is timed from `POST /prompt` to `executing null` on the client's socket. With
preload the gateway warms the checkpoint (one step at 64x64) before the worker counts as ready.

    python -m bench.warmup [--runs 3] [--warm 3] [--time-scale 0.1] [--out bench/results/warmup.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench.ws import until_done
from gateway.serve import serve_argv
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

TRANSCRIPT = Path(__file__).parents[1] / "tests" / "contract" / "ws_transcript.json"
CHECKPOINT = "sd_xl_base_1.0.safetensors"
PROFILE = "rtx4070ti"


@dataclass(frozen=True)
class Run:
    ready_s: float
    first_s: float
    warm_s: float

    @property
    def ratio(self) -> float:
        return self.first_s / self.warm_s


def prompt(seed: int) -> dict[str, Any]:
    """The recorded transcript's graph as SDXL 1024x1024, 20 steps."""
    data = json.loads(TRANSCRIPT.read_text())
    graph: dict[str, Any] = data["responses"]["queue_during"]["queue_running"][0][2]
    graph["4"]["inputs"]["ckpt_name"] = CHECKPOINT
    graph["5"]["inputs"].update(width=1024, height=1024)
    graph["3"]["inputs"].update(seed=seed, steps=20)
    return graph


def config_text(preload: bool, time_scale: float) -> str:
    lines = [
        f"time_scale = {time_scale}",
        "[[workers]]",
        'name = "card"',
        f'emulate = "{PROFILE}"',
        f'checkpoints = ["{CHECKPOINT}"]',
        f"preload = {json.dumps([CHECKPOINT] if preload else [])}",
    ]
    return "\n".join(lines) + "\n"


async def job_seconds(http: httpx.AsyncClient, ws: ClientConnection, sid: str, seed: int) -> float:
    started = time.perf_counter()
    answer = await http.post("/prompt", json={"prompt": prompt(seed), "client_id": sid})
    await until_done(ws, answer.json()["prompt_id"])
    return time.perf_counter() - started


async def measure(url: str, warm: int) -> tuple[float, float]:
    """(first job, median of the warm jobs), in seconds."""
    sid = uuid.uuid4().hex
    ws_url = url.replace("http", "ws", 1) + f"/ws?clientId={sid}"
    async with httpx.AsyncClient(base_url=url, timeout=120) as http, connect(ws_url) as ws:
        await ws.recv()
        first = await job_seconds(http, ws, sid, seed=1)
        warm_s = [await job_seconds(http, ws, sid, seed=2 + i) for i in range(warm)]
    return first, statistics.median(warm_s)


def start(root: Path, preload: bool, time_scale: float) -> tuple[ChildProcess, str, float]:
    config = root / "farm.toml"
    config.write_text(config_text(preload, time_scale))
    port = free_port()
    argv = serve_argv(port, root / "data", "--log-level", "warning", config=config)
    process = ChildProcess(argv, env=dict(os.environ), log_path=root / "gateway.log")
    started = time.perf_counter()
    process.start()
    url = f"http://127.0.0.1:{port}"
    process.wait_ready(url + "/readyz", 120, interval_s=0.02)
    return process, url, time.perf_counter() - started


def one_run(preload: bool, time_scale: float, warm: int) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-warmup-") as tmp:
        process, url, ready_s = start(Path(tmp), preload, time_scale)
        try:
            first, warm_s = asyncio.run(measure(url, warm))
        finally:
            process.terminate(10)
    return Run(ready_s, first, warm_s)


def table(results: dict[str, list[Run]]) -> str:
    rows = [
        "| preload | runs | start to ready s | first job s | warm job s | first / warm |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, runs in results.items():
        ratios = [run.ratio for run in runs]
        rows.append(
            f"| {mode} | {len(runs)} "
            f"| {statistics.median(r.ready_s for r in runs):.2f} "
            f"| {statistics.median(r.first_s for r in runs):.3f} "
            f"| {statistics.median(r.warm_s for r in runs):.3f} "
            f"| **{statistics.median(ratios):.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    return "\n".join(rows)


def report(results: dict[str, list[Run]], args: argparse.Namespace, load: float) -> str:
    command = "python -m bench.warmup " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
    )
    return f"""# Warm-up: the first client job after a worker starts

{table(results)}

- Setup: one emulated `{PROFILE}` worker behind `comfy-gateway serve` (embedded Redis); emulator
  time scale {args.time_scale}, so seconds here x {1 / args.time_scale:g} = seconds on the card.
- Jobs: SDXL (`{CHECKPOINT}`) 1024x1024, 20 steps, timed from `POST /prompt` to
  `executing null` on the client's WebSocket. First job: the first after `/readyz` answered 200.
  Warm job: the median of {args.warm} more with other seeds. Medians over {args.runs} runs per
  mode; the ratio's range in brackets.
- Start to ready: from spawning the gateway to `/readyz` 200. Preload moves the cold start
  (CUDA set-up, checkpoint load) there, before clients see the worker: a one-step 64x64 run,
  then a 10-step speed probe at the family's native size.
- Machine: {os.cpu_count()} CPU cores shared with the gateway, Redis and the emulator; 1-minute
  load average before the run {load:.2f}; Python {sys.version.split()[0]}.

Made by `{command}`.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--out", default="bench/results/warmup.md")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results: dict[str, list[Run]] = {"none": [], f"`{CHECKPOINT}`": []}
    for _ in range(args.runs):
        for mode, preload in zip(results, (False, True), strict=True):
            results[mode].append(one_run(preload, args.time_scale, args.warm))
    text = report(results, args, load)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
