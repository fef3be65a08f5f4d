"""Gateway overhead against the emulator called directly.

Starts `comfy-gateway serve` (embedded Redis with AOF everysec, emulated workers at a tiny time
scale) and, beside it, one more emulator with the same settings. Then, for each target:

- latency: jobs one at a time, from sending `POST /prompt` to receiving `executing null` on the
  client's WebSocket; the gateway's extra latency is its percentile minus the direct one;
- accept rate: prompts posted by concurrent clients as fast as they are answered.

    python -m bench.overhead [--jobs 300] [--accept 3000] [--out bench/results/overhead.md]

With `--ledger-side-by-side`, two gateways run at once, one recording each job's phase ledger
and one not (`ledger = false`), each over its own emulators, and their latencies are measured in
alternating rounds, so that the machine's drift hits both alike:

    python -m bench.overhead --ledger-side-by-side [--jobs 600] [--control] [--out ...]

`--control` runs the same with the ledger on in both: what the two gateways differ by without
any difference in code (the noise floor of the comparison on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from bench.ws import until_done
from gateway.serve import serve_argv
from workers.readiness import Pacing, answers_200, wait_until
from workers.supervision.launch import FarmLayout, WorkerSpec, emulator_argv
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

TRANSCRIPT = Path(__file__).parents[1] / "tests" / "contract" / "ws_transcript.json"
CHECKPOINT = "v1-5-pruned-emaonly.safetensors"


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float
    mean_ms: float


def prompt(seed: int) -> dict[str, Any]:
    data = json.loads(TRANSCRIPT.read_text())
    graph: dict[str, Any] = data["responses"]["queue_during"]["queue_running"][0][2]
    graph["4"]["inputs"]["ckpt_name"] = CHECKPOINT
    graph["3"]["inputs"]["seed"] = seed
    return graph


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def latencies(base_url: str, jobs: int) -> Latency:
    """Sequential jobs: POST /prompt until `executing null` for it arrives on the socket."""
    return summary(await samples_ms(base_url, jobs))


def summary(samples: Sequence[float]) -> Latency:
    return Latency(percentile(samples, 0.5), percentile(samples, 0.99), statistics.fmean(samples))


async def samples_ms(base_url: str, jobs: int, warmup: int = 10) -> list[float]:
    """Milliseconds of `jobs` sequential jobs, after `warmup` jobs that warm caches and
    connections."""
    client_id = uuid.uuid4().hex
    ws_url = base_url.replace("http", "ws", 1) + f"/ws?clientId={client_id}"
    samples: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http, connect(ws_url) as ws:
        await ws.recv()
        for seed in range(jobs + warmup):
            started = time.perf_counter()
            answer = await http.post(
                "/prompt", json={"prompt": prompt(seed), "client_id": client_id}
            )
            await until_done(ws, answer.json()["prompt_id"])
            if seed >= warmup:
                samples.append((time.perf_counter() - started) * 1000)
    return samples


async def accept_rate(base_url: str, total: int, concurrency: int) -> float:
    """Prompts per second answered 200 to `concurrency` keep-alive connections posting back to
    back. A minimal HTTP/1.1 client, so the client's own cost stays small next to the server's."""
    body = json.dumps({"prompt": prompt(1), "client_id": "bench-accept"}).encode()
    host, port = base_url.removeprefix("http://").split(":")
    head = (
        f"POST /prompt HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request = head + body
    counter = iter(range(total))

    async def poster() -> int:
        reader, writer = await asyncio.open_connection(host, int(port))
        done = 0
        for _ in counter:
            writer.write(request)
            done += await _read_response(reader) == 200
        writer.close()
        await writer.wait_closed()
        return done

    started = time.perf_counter()
    accepted = sum(await asyncio.gather(*(poster() for _ in range(concurrency))))
    return accepted / (time.perf_counter() - started)


async def _read_response(reader: asyncio.StreamReader) -> int:
    """Status of one response; its body (Content-Length framed) is read and dropped."""
    header = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status = int(header.split(" ", 2)[1])
    length = 0
    for line in header.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


def wait_ready(url: str, timeout_s: float = 120) -> None:
    with httpx.Client(timeout=1) as client:
        wait_until(answers_200(client, url + "/readyz"), timeout_s, pacing=Pacing(0.2, 1.0, 0.2))


def start_emulator(root: Path, name: str, time_scale: float) -> tuple[ChildProcess, str]:
    layout = FarmLayout(root / "workers", root / "input", time_scale)
    for folder in (layout.input_dir, layout.output_dir(name), layout.temp_parent(name)):
        folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = emulator_argv(WorkerSpec(name=name, emulate="rtx4070ti"), port, layout)
    process = ChildProcess(argv, log_path=root / f"{name}.log")
    process.start()
    url = f"http://127.0.0.1:{port}"
    process.wait_ready(url + "/prompt", 60)
    return process, url


def start_gateway(
    root: Path, worker_urls: list[str], env: dict[str, str] | None = None
) -> tuple[ChildProcess, str]:
    """`comfy-gateway serve` with its embedded Redis (AOF everysec) over running emulators."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "gateway.toml"
    config.write_text(
        "".join(
            f'[[workers]]\nname = "sim{i}"\nurl = "{url}"\n\n' for i, url in enumerate(worker_urls)
        )
    )
    port = free_port()
    argv = serve_argv(port, root / "gw", "--log-level", "warning", config=config)
    env = {**os.environ, "COMFY_GATEWAY_HISTORY_MAX_ITEMS": "100000", **(env or {})}
    process = ChildProcess(argv, env=env, log_path=root / "gateway.log")
    process.start()
    url = f"http://127.0.0.1:{port}"
    wait_ready(url)
    return process, url


async def measure(url: str, jobs: int, accept: int, concurrency: int) -> tuple[Latency, float]:
    latency = await latencies(url, jobs)
    rate = await accept_rate(url, accept, concurrency)
    return latency, rate


def table(direct: tuple[Latency, float], gateway: tuple[Latency, float], args: Any) -> str:
    (d, d_rate), (g, g_rate) = direct, gateway
    rows = [
        "| target | p50 ms | p99 ms | mean ms | accepted prompts/s |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| emulator, direct | {d.p50_ms:.2f} | {d.p99_ms:.2f} | {d.mean_ms:.2f} | {d_rate:.0f} |",
        f"| via the gateway | {g.p50_ms:.2f} | {g.p99_ms:.2f} | {g.mean_ms:.2f} | {g_rate:.0f} |",
        f"| **added by the gateway** | **{g.p50_ms - d.p50_ms:.2f}** | "
        f"**{g.p99_ms - d.p99_ms:.2f}** | {g.mean_ms - d.mean_ms:.2f} | |",
    ]
    setup = (
        f"{args.jobs} sequential jobs (after 10 warm-up jobs) for latency; {args.accept} prompts "
        f"from {args.concurrency} concurrent clients for the accept rate; {args.workers} emulated "
        f"workers behind the gateway, time scale {args.time_scale}; embedded Redis with AOF "
        f"`appendfsync everysec`; {os.cpu_count()} CPU cores ({platform.processor() or 'unknown'}),"
        f" Python {platform.python_version()}; client, gateway, Redis and emulators share them"
        f" (1-minute load average before the run: {args.load_before:.2f})."
    )
    return "\n".join(rows) + "\n\n" + setup + "\n"


async def run(args: Any) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = [start_emulator(root, f"e{i}", args.time_scale) for i in range(args.workers + 1)]
        gateway = start_gateway(root, [url for _, url in started[1:]])
        try:
            direct = await measure(started[0][1], args.jobs, args.accept, args.concurrency)
            through = await measure(gateway[1], args.jobs, args.accept, args.concurrency)
        finally:
            for process, _ in [gateway, *started]:
                process.terminate()
    return table(direct, through, args)


ROUNDS = 40


async def ledger_side_by_side(args: Any) -> str:
    """Latency with the ledger on and off, two gateways measured in alternating rounds."""
    arms = {"ledger on": "true", "ledger off": "true" if args.control else "false"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        processes: list[ChildProcess] = []
        urls = {}
        try:
            for index, (arm, value) in enumerate(arms.items()):
                emulators = [
                    start_emulator(root, f"e{index}_{i}", args.time_scale)
                    for i in range(args.workers)
                ]
                processes += [process for process, _ in emulators]
                gateway = start_gateway(
                    root / f"gw{index}",
                    [url for _, url in emulators],
                    {"COMFY_GATEWAY_LEDGER": value},
                )
                processes.append(gateway[0])
                urls[arm] = gateway[1]
            samples: dict[str, list[float]] = {arm: [] for arm in arms}
            paired: list[float] = []
            per_round = max(args.jobs // ROUNDS, 1)
            for round_index in range(ROUNDS):
                order = list(arms) if round_index % 2 == 0 else list(reversed(arms))
                medians = {}
                for arm in order:
                    got = await samples_ms(urls[arm], per_round, warmup=2)
                    samples[arm] += got
                    medians[arm] = statistics.median(got)
                paired.append(medians["ledger on"] - medians["ledger off"])
        finally:
            for process in processes:
                process.terminate()
    return side_by_side_table(
        {arm: summary(s) for arm, s in samples.items()}, statistics.median(paired), args
    )


def side_by_side_table(results: dict[str, Latency], paired_ms: float, args: Any) -> str:
    on, off = results["ledger on"], results["ledger off"]
    second = "ledger on (control)" if args.control else "ledger off"
    rows = [
        "| gateway | p50 ms | p99 ms | mean ms |",
        "| --- | ---: | ---: | ---: |",
        f"| ledger on | {on.p50_ms:.2f} | {on.p99_ms:.2f} | {on.mean_ms:.2f} |",
        f"| {second} | {off.p50_ms:.2f} | {off.p99_ms:.2f} | {off.mean_ms:.2f} |",
        f"| **difference** | **{on.p50_ms - off.p50_ms:.2f}** | "
        f"{on.p99_ms - off.p99_ms:.2f} | {on.mean_ms - off.mean_ms:.2f} |",
        f"| median of the {ROUNDS} rounds' p50 differences | {paired_ms:.2f} | | |",
    ]
    setup = (
        f"{args.jobs} sequential jobs per gateway in {ROUNDS} alternating rounds (2 warm-up jobs "
        f"each); {args.workers} emulated workers behind each gateway, time scale "
        f"{args.time_scale}; embedded Redis with AOF `appendfsync everysec`; {os.cpu_count()} "
        f"CPU cores, Python {platform.python_version()}; everything shares them (1-minute load "
        f"average before the run: {args.load_before:.2f})."
    )
    return "\n".join(rows) + "\n\n" + setup + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--accept", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-scale", dest="time_scale", type=float, default=0.001)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--ledger-side-by-side", dest="ledger", action="store_true")
    parser.add_argument("--control", action="store_true")
    args = parser.parse_args(argv)
    args.load_before = os.getloadavg()[0]
    result = asyncio.run(ledger_side_by_side(args) if args.ledger else run(args))
    print(result)
    if args.out is not None:
        command = "python -m bench.overhead " + " ".join(argv or sys.argv[1:])
        title = "The phase ledger's cost" if args.ledger else "Gateway overhead"
        args.out.write_text(f"# {title}\n\n{result}\nMade by `{command.strip()}`.\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
