"""A Jepsen-style run: many short jobs while a nemesis kills workers (SIGKILL) and the gateway
itself (SIGKILL, then a new `serve` on the same data dir), with clients that retry with an
idempotency key as a careful ComfyUI client would. Then a checker, over everything accepted:

- lost = 0: every accepted prompt ends in success, in `/history` and in its record;
- duplicates = 0: each job's image is written exactly once (a run killed before its end writes
  none, so one file per job means it ran to completion exactly once). One window no gateway can
  close: a worker killed after its job wrote its image but before its frames left the process
  (ComfyUI's too). Such a run is told apart, not forgiven blindly: its extra image was written
  by a worker whose attempt ended "crashed its worker", within that attempt's own span, and
  the job's last attempt succeeded; those are counted (`cut_after_output`), at most one per
  worker kill;
- one terminal record per job: `/history` lists each accepted prompt once, and nothing else.

The default run is small enough for CI; `-m slow` runs the longer soak.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
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


@dataclass(frozen=True)
class Image:
    worker: str
    written_at_ms: int


def _images(data_dir: Path) -> dict[str, list[Image]]:
    """The images of each prefix, over every worker's output folder."""
    images: dict[str, list[Image]] = {}
    root = data_dir / "workers"
    for path in root.glob("*/output/**/*.png"):
        worker = path.relative_to(root).parts[0]
        image = Image(worker, int(path.stat().st_mtime * 1000))
        images.setdefault(path.name.split("_")[0], []).append(image)
    return images


def _cut_after_output(images: list[Image], attempts: list[dict[str, Any]]) -> bool:
    """Whether the job's extra images are each from an attempt whose worker was killed after
    writing it: the one window where running twice is not the gateway's doing."""
    slack_ms = 50  # file times and the store's clock are read apart
    if not attempts or attempts[-1].get("outcome") != "success":
        return False
    cut = [a for a in attempts[:-1] if a.get("outcome") == "crashed its worker"]

    def during(image: Image, attempt: dict[str, Any]) -> bool:
        start, end = attempt.get("started_at_ms"), attempt.get("ended_at_ms")
        if image.worker != attempt.get("worker") or start is None or end is None:
            return False
        return bool(int(start) - slack_ms <= image.written_at_ms <= int(end) + slack_ms)

    extra = len(images) - 1
    explained = sum(any(during(image, a) for a in cut) for image in images)
    return extra <= len(cut) and explained >= extra


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
    twice = {j: p for j, p in run.accepted.items() if len(images.get(p, [])) > 1}
    cut = {j for j, p in twice.items() if _cut_after_output(images[p], _attempts(records[j]))}
    report = {
        "accepted": len(run.accepted),
        "lost": sorted(j for j, r in records.items() if r.get("state") != "success"),
        "duplicates": {p: records[j].get("attempts") for j, p in twice.items() if j not in cut},
        "cut_after_output": sorted(twice[j] for j in cut),
        "missing_images": sorted(p for p in run.accepted.values() if not images.get(p)),
        "history_extra": sorted(set(history) - set(run.accepted)),
        "history_missing": sorted(set(run.accepted) - set(history)),
        "worker_kills": run.worker_kills,
        "gateway_kills": run.gateway_kills,
        "retried_posts": run.retries,
    }
    return run, report


def _attempts(record: dict[str, Any]) -> list[dict[str, Any]]:
    attempts = record.get("attempts")
    return attempts if isinstance(attempts, list) else []


def _check(report: dict[str, Any], jobs: int) -> None:
    summary = json.dumps(report, indent=1)
    assert report["accepted"] == jobs, summary
    assert report["lost"] == [], summary
    assert report["duplicates"] == {}, summary
    assert len(report["cut_after_output"]) <= report["worker_kills"], summary
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


def _attempt(outcome: str, worker: str, started_at_ms: int, ended_at_ms: int) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "worker": worker,
        "started_at_ms": started_at_ms,
        "ended_at_ms": ended_at_ms,
    }


CRASHED, SUCCEEDED = (
    _attempt("crashed its worker", "n1", 1000, 1200),
    _attempt("success", "n0", 1300, 1400),
)


@pytest.mark.parametrize(
    ("images", "attempts", "cut"),
    [
        # killed after writing: the extra image lies in the crashed attempt's span
        ([Image("n1", 1150), Image("n0", 1390)], [CRASHED, SUCCEEDED], True),
        # ran twice to success: the gateway's fault
        (
            [Image("n1", 1150), Image("n0", 1390)],
            [_attempt("success", "n1", 1000, 1200), SUCCEEDED],
            False,
        ),
        # the extra image was written by another worker than the one that crashed
        ([Image("n0", 1150), Image("n0", 1390)], [CRASHED, SUCCEEDED], False),
        # the extra image was written long after the crashed attempt ended
        ([Image("n1", 5000), Image("n0", 1390)], [CRASHED, SUCCEEDED], False),
        # three images, one crash: one image too many
        ([Image("n1", 1150), Image("n0", 1350), Image("n0", 1390)], [CRASHED, SUCCEEDED], False),
        # the job did not end in success
        ([Image("n1", 1150), Image("n0", 1390)], [CRASHED], False),
    ],
)
def test_the_checker_forgives_only_a_run_cut_after_its_output(
    images: list[Image], attempts: list[dict[str, Any]], cut: bool
) -> None:
    assert _cut_after_output(images, attempts) is cut
