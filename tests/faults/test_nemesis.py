"""A Jepsen-style run: many short jobs while a nemesis kills workers (SIGKILL) and the gateway
itself (SIGKILL, then a new `serve` on the same data dir), with clients that retry with an
idempotency key as a careful ComfyUI client would. Then a checker, over everything accepted:

- lost = 0: every accepted prompt ends in success, in `/history` and in its record;
- duplicates = 0: each job's image is written exactly once (a run killed before its end writes
  none, so one file per job means it ran to completion exactly once);
- one terminal record per job: `/history` lists each accepted prompt once, and nothing else.

The default run is small enough for CI; `-m slow` runs the longer soak.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.faults.farms import AUTH, FAST, GatewayProcess, gateway_process
from tests.integration.conftest import CHECKPOINTS, txt2img

WORKERS = ["n0", "n1"]


@dataclass
class Run:
    """What the clients and the nemesis did, for the checker."""

    accepted: dict[str, str] = field(default_factory=dict)
    """prompt id -> the filename prefix of its image."""
    retries: int = 0
    worker_kills: int = 0
    gateway_kills: int = 0


class Node:
    """The gateway of this data dir, across its restarts."""

    def __init__(self, config: Path, redis_url: str, data_dir: Path):
        self.config, self.redis_url, self.data_dir = config, redis_url, data_dir
        self.stack = ExitStack()
        self.gateway: GatewayProcess | None = None

    def start(self) -> GatewayProcess:
        self.gateway = self.stack.enter_context(
            gateway_process(self.config, self.redis_url, self.data_dir)
        )
        return self.gateway

    def kill(self) -> None:
        assert self.gateway is not None
        self.gateway.process.send_signal(signal.SIGKILL)
        self.gateway.process.wait()

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url


@contextmanager
def node(config: Path, redis_url: str, data_dir: Path) -> Iterator[Node]:
    farm = Node(config, redis_url, data_dir)
    with farm.stack:
        farm.start()
        yield farm


def _config(path: Path) -> Path:
    values = {k: v for k, v in FAST.items() if not isinstance(v, dict)}
    lines = [f"{key} = {value!r}".replace("'", '"') for key, value in values.items()]
    lines += ["[restart]", "backoff_initial_s = 0.05", "backoff_max_s = 0.2"]
    lines += ["flap_exits = 100"]  # the nemesis's kills must not fail a worker for good
    checkpoints = ", ".join(f'"{c}"' for c in CHECKPOINTS)
    for name in WORKERS:
        lines += ["[[workers]]", f'name = "{name}"', 'emulate = "rtx4070ti"']
        lines += [f"checkpoints = [{checkpoints}]"]
    path.write_text("\n".join(lines) + "\n")
    return path


async def _submit(farm: Node, run: Run, index: int) -> None:
    """POST one prompt until the gateway answers, with the same idempotency key each time."""
    prefix = f"job{index:05d}"
    prompt = txt2img(CHECKPOINTS[index % len(CHECKPOINTS)], prefix, seed=index, steps=4)
    body = {"prompt": prompt, "client_id": "nemesis-client"}
    headers = {**AUTH, "Idempotency-Key": prefix}
    for attempt in range(400):
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                answer = await http.post(farm.url + "/prompt", json=body, headers=headers)
            if answer.status_code == 200:
                run.accepted[answer.json()["prompt_id"]] = prefix
                return
        except httpx.HTTPError:
            pass
        run.retries += attempt == 0
        await asyncio.sleep(0.05)
    raise AssertionError(f"{prefix} never accepted")


async def _clients(farm: Node, run: Run, jobs: int, concurrency: int = 4) -> None:
    queue = iter(range(jobs))

    async def client() -> None:
        for index in queue:
            await _submit(farm, run, index)

    await asyncio.gather(*(client() for _ in range(concurrency)))


async def _nemesis(
    farm: Node, run: Run, rng: random.Random, kills: int, done: asyncio.Event
) -> None:
    """Kill a random worker `kills` times and, half-way, the gateway once."""
    for round_ in range(kills + 1):
        await asyncio.sleep(rng.uniform(0.4, 1.2))
        if done.is_set():
            return
        if round_ == kills // 2:
            await asyncio.to_thread(farm.kill)
            run.gateway_kills += 1
            await asyncio.to_thread(farm.start)
            continue
        pids = await _worker_pids(farm)
        if pids:
            os.kill(rng.choice(pids), signal.SIGKILL)
            run.worker_kills += 1


async def _worker_pids(farm: Node) -> list[int]:
    try:
        async with httpx.AsyncClient(timeout=5, headers=AUTH) as http:
            workers = (await http.get(farm.url + "/gateway/workers")).json()["workers"]
    except httpx.HTTPError:
        return []
    return [w["pid"] for w in workers if w.get("pid")]


async def _settled(farm: Node, job_ids: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Each job's record once every one has ended (or the deadline passed)."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + timeout_s
    records: dict[str, dict[str, Any]] = {}
    async with httpx.AsyncClient(base_url=farm.url, timeout=10, headers=AUTH) as http:
        while loop.time() < deadline_s:
            for job_id in job_ids:
                if records.get(job_id, {}).get("state") not in ("success", "error"):
                    records[job_id] = (await http.get(f"/gateway/jobs/{job_id}")).json()
            if all(r.get("state") in ("success", "error") for r in records.values()):
                break
            await asyncio.sleep(0.2)
        history = (await http.get("/history", params={"max_items": 100000})).json()
    records["/history"] = history
    return records


def _images(data_dir: Path) -> Counter[str]:
    """How many images each prefix has, over every worker's output folder."""
    files = (data_dir / "workers").glob("*/output/**/*.png")
    return Counter(path.name.split("_")[0] for path in files)


async def _nemesis_run(
    redis_url: str, tmp_path: Path, *, jobs: int, kills: int, seed: int
) -> tuple[Run, dict[str, Any]]:
    run, rng = Run(), random.Random(seed)
    data_dir = tmp_path / "node"
    with node(_config(tmp_path / "farm.toml"), redis_url, data_dir) as farm:
        done = asyncio.Event()
        nemesis = asyncio.create_task(_nemesis(farm, run, rng, kills, done))
        await _clients(farm, run, jobs)
        await nemesis
        done.set()
        records = await _settled(farm, sorted(run.accepted), timeout_s=90)
    history = records.pop("/history")
    images = _images(data_dir)
    report = {
        "accepted": len(run.accepted),
        "lost": sorted(j for j, r in records.items() if r.get("state") != "success"),
        "duplicates": {
            p: records[j].get("attempts") for j, p in run.accepted.items() if images[p] > 1
        },
        "missing_images": sorted(p for p in run.accepted.values() if images[p] == 0),
        "history_extra": sorted(set(history) - set(run.accepted)),
        "history_missing": sorted(set(run.accepted) - set(history)),
        "worker_kills": run.worker_kills,
        "gateway_kills": run.gateway_kills,
        "retried_posts": run.retries,
    }
    return run, report


def _check(report: dict[str, Any], jobs: int) -> None:
    summary = json.dumps(report, indent=1)
    assert report["accepted"] == jobs, summary
    assert report["lost"] == [], summary
    assert report["duplicates"] == {}, summary
    assert report["missing_images"] == [], summary
    assert report["history_extra"] == [] and report["history_missing"] == [], summary
    assert report["gateway_kills"] == 1 and report["worker_kills"] >= 2, summary


@pytest.mark.timeout(240)
async def test_nothing_is_lost_or_run_twice_under_worker_and_gateway_kills(
    redis_url: str, tmp_path: Path
) -> None:
    _, report = await _nemesis_run(redis_url, tmp_path, jobs=120, kills=3, seed=1)
    _check(report, 120)


SOAK_JOBS = int(os.environ.get("NEMESIS_JOBS", "1000"))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", [2, 3, 4])
async def test_soak_nothing_is_lost_or_run_twice(redis_url: str, tmp_path: Path, seed: int) -> None:
    kills = max(4, SOAK_JOBS // 80)
    _, report = await _nemesis_run(redis_url, tmp_path, jobs=SOAK_JOBS, kills=kills, seed=seed)
    if out := os.environ.get("NEMESIS_REPORT_DIR"):  # bench/soak.py collects these
        path, text = Path(out, f"seed{seed}.json"), json.dumps({"seed": seed, **report})
        await asyncio.to_thread(path.write_text, text)
    _check(report, SOAK_JOBS)
