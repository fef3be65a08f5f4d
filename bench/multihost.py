"""Two gateway nodes on one Redis, one emulated worker each: what crossing nodes costs.

1. Latency, from `POST /prompt` to the `executing` null its client hears on `/ws`, of jobs for
   a checkpoint only node B's worker has, warm there: posted to B, and posted to A.
2. `/view` of an output of B's worker: from B, and through A (streamed from B).
3. Take-over: B (gateway and worker) SIGKILLed while its worker runs a job (placed while A's
   worker was drained); seconds until the job is back in the queue, and until it ended on A's
   worker.

The nodes are the test suite's (tests/multihost): `comfy-gateway serve` processes with
`node_ttl_s` 1.5 and time scale 0.05 on an embedded Redis. Wall milliseconds.

    python -m bench.multihost [--jobs 20] [--out bench/results/multihost.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from gateway.redis_server import EmbeddedRedis
from tests.faults.farms import AUTH
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.multihost.conftest import NODE, client_of, nodes
from tests.multihost.test_node_loss import kill_node

ONLY_B, BOTH = CHECKPOINTS[2], CHECKPOINTS[1]
FARM = {
    "wa": {"checkpoints": CHECKPOINTS[:2], "preload": [CHECKPOINTS[0]]},
    "wb": {"checkpoints": CHECKPOINTS[1:], "preload": [ONLY_B]},
}


async def latencies_ms(client: ComfyStyleClient, jobs: int, tag: str) -> list[float]:
    out = []
    for seed in range(jobs):
        started = time.perf_counter()
        prompt_id = await client.queue_prompt(txt2img(ONLY_B, tag, seed=seed))
        entry = await client.wait(prompt_id)
        out.append((time.perf_counter() - started) * 1000)
        assert entry["gateway"]["worker"] == "wb", entry["gateway"]
    return out


async def views_ms(url: str, image: dict[str, str], count: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as http:
        for _ in range(count):
            started = time.perf_counter()
            answer = await http.get(url + "/view", params=image)
            out.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200
    return out


async def requeued(client: ComfyStyleClient, prompt_id: str, timeout_s: float = 30) -> None:
    """Until its first attempt was closed (taken over)."""
    for _ in range(int(timeout_s / 0.01)):
        attempts = (await client.job(prompt_id))["attempts"]
        if attempts and attempts[0].get("outcome"):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{prompt_id} never taken over")


async def take_over_s(
    client: ComfyStyleClient, b_url: str, kill: Callable[[dict[str, Any]], None]
) -> tuple[float, float]:
    async with httpx.AsyncClient(headers=AUTH, timeout=5) as http:
        # A drained while the job is placed, so that it runs on B; A takes it over.
        await client.http.post("/gateway/workers/wa/drain")
        prompt_id = await client.queue_prompt(txt2img(BOTH, "long", steps=3000))
        await client.job_in(prompt_id, ("running",), timeout_s=20)
        await client.http.post("/gateway/workers/wa/resume")
        worker = (await http.get(b_url + "/gateway/workers/wb")).json()
    killed = time.perf_counter()
    kill(worker)
    await requeued(client, prompt_id)
    back_s = time.perf_counter() - killed
    await client.wait(prompt_id, timeout_s=120)
    return back_s, time.perf_counter() - killed


def row(name: str, values: list[float]) -> str:
    p95 = sorted(values)[max(0, round(0.95 * len(values)) - 1)]
    return f"| {name} | {len(values)} | {statistics.median(values):.1f} | {p95:.1f} |"


async def run(jobs: int) -> str:
    root = Path(tempfile.mkdtemp(prefix="bench-multihost-"))
    redis = EmbeddedRedis(root / "redis")
    redis.start()
    try:
        with nodes(redis.url, root, FARM) as (a, b):
            async with client_of(b.url) as on_b:  # closed before B is killed
                local = await latencies_ms(on_b, jobs, "local")
            async with client_of(a.url) as on_a:
                across = await latencies_ms(on_a, jobs, "across")
                entry = await on_a.wait(on_a.prompt_ids_seen().pop())
                image = entry["outputs"]["9"]["images"][0]
                direct = await views_ms(b.url, image, jobs * 2)
                proxied = await views_ms(a.url, image, jobs * 2)
                back_s, done_s = await take_over_s(on_a, b.url, lambda w: kill_node(b, w))
    finally:
        redis.stop()
    return "\n".join(
        [
            "| measure | n | p50 ms | p95 ms |",
            "| --- | ---: | ---: | ---: |",
            row("job for B's warm worker, posted to B", local),
            row("... posted to A", across),
            row("/view of B's output, from B", direct),
            row("... through A", proxied),
            "",
            f"Take-over at `node_ttl_s` {NODE['node_ttl_s']}: the job of the killed node was "
            f"back in the queue {back_s:.2f} s after the SIGKILL and had ended on A's worker "
            f"{done_s:.2f} s after it (a cold load there, and the job from its start).",
        ]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.multihost")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    table = asyncio.run(run(args.jobs))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = f"python -m bench.multihost --jobs {args.jobs}"
    command += f" --out {args.out}" if args.out else ""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    text = (
        f"# Two gateway nodes on one Redis\n\nMade by `{command}` on {now}, on a machine of "
        f"{os.cpu_count()} cores at load average {load} (1, 5, 15 min).\n\n{table}\n"
    )
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
