"""Several gateway nodes on one Redis: real `comfy-gateway serve` processes on loopback, each
with its own data dir and one emulated worker, on small time scales."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gateway.redis_server import EmbeddedRedis
from tests.faults.farms import AUTH, FAST, TOKEN, GatewayProcess, gateway_process
from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import CHECKPOINTS

ONLY_A, ONLY_B = CHECKPOINTS[0], CHECKPOINTS[2]
NODE: dict[str, Any] = {
    **FAST,
    "time_scale": 0.05,
    "lease_s": 2.0,
    "node_ttl_s": 4.0,
    "policy": "affinity",
}


def node_file(path: Path, worker: str, checkpoints: Sequence[str], **extra: Any) -> Path:
    """A farm file of one emulated worker with these checkpoints."""
    given = {**NODE, **extra}
    lines = [f"{k} = {_toml(v)}" for k, v in given.items() if not isinstance(v, dict)]
    lines += ["[restart]", *(f"{k} = {_toml(v)}" for k, v in NODE["restart"].items())]
    lines += ["[[workers]]", f'name = "{worker}"', 'emulate = "rtx4070ti"']
    lines += [f"checkpoints = {_toml(list(checkpoints))}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def node_process(
    redis_url: str, root: Path, worker: str, checkpoints: Sequence[str] = CHECKPOINTS, **extra: Any
) -> AbstractContextManager[GatewayProcess]:
    """A gateway node (not started yet) of one worker, its data dir `root/worker`."""
    config = node_file(root / worker / "farm.toml", worker, checkpoints, **extra)
    return gateway_process(config, redis_url, root / worker)


@contextmanager
def started_together(
    processes: Sequence[AbstractContextManager[GatewayProcess]],
) -> Iterator[list[GatewayProcess | BaseException]]:
    """Start the nodes at the same moment; each is its process, or why it did not start."""
    with ExitStack() as stack, ThreadPoolExecutor(len(processes)) as pool:
        futures = [pool.submit(process.__enter__) for process in processes]
        out: list[GatewayProcess | BaseException] = []
        for process, future in zip(processes, futures, strict=True):
            error = future.exception()
            if error is None:
                stack.push(process)
            out.append(future.result() if error is None else error)
        yield out


@contextmanager
def nodes(
    redis_url: str, root: Path, workers: Mapping[str, Mapping[str, Any]]
) -> Iterator[list[GatewayProcess]]:
    """One node per worker (name -> its node's settings, `checkpoints` among them), all on
    `redis_url`, started together; each sees the others' workers before this yields."""
    processes = [node_process(redis_url, root, name, **spec) for name, spec in workers.items()]
    with started_together(processes) as started:
        ready = [node for node in started if isinstance(node, GatewayProcess)]
        if len(ready) != len(started):
            raise next(node for node in started if isinstance(node, BaseException))
        for node in ready:
            wait_nodes(node.url, len(ready) - 1)
        yield ready


def farm_nodes(url: str) -> dict[str, Any]:
    """The node's `/gateway/nodes`: itself and the live others."""
    body: dict[str, Any] = httpx.get(url + "/gateway/nodes", headers=AUTH, timeout=5).json()
    return body


def wait_nodes(url: str, others: int, timeout_s: float = 15.0) -> dict[str, Any]:
    """The node's view of the farm once it sees `others` other nodes, each with its workers
    ready (blocking: a short wait, also from a test's event loop)."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = farm_nodes(url)
        ready = [n for n in body["others"] if set(n["workers"].values()) == {"ready"}]
        if len(ready) == others == len(body["others"]):
            return body
        assert time.monotonic() < deadline, f"{url} never saw {others} other nodes: {body}"
        time.sleep(0.05)


async def checkpoints_of(url: str) -> list[str]:
    """The checkpoints the farm offers, as the node validates prompts against them."""
    async with httpx.AsyncClient(headers=AUTH, timeout=5) as http:
        info = (await http.get(url + "/object_info/CheckpointLoaderSimple")).json()
    if not info:
        return []
    names: list[str] = info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"][0]
    return names


async def until_checkpoints(url: str, present: bool, name: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (name in await checkpoints_of(url)) != present:
        assert time.monotonic() < deadline, f"{name} never {'in' if present else 'out of'} {url}"
        await asyncio.sleep(0.05)


@pytest.fixture(scope="module")
def split_farm(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    """Two nodes for a module's tests: `wa` offers only ONLY_A, `wb` only ONLY_B."""
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    client.close()
    root = tmp_path_factory.mktemp("split-farm")
    workers = {"wa": {"checkpoints": [ONLY_A]}, "wb": {"checkpoints": [ONLY_B]}}
    with nodes(redis_server.url, root, workers) as started:
        yield started


@asynccontextmanager
async def client_of(url: str) -> AsyncIterator[ComfyStyleClient]:
    """A ComfyUI-style client of the node (its socket open), with the farm's token."""
    client = ComfyStyleClient(url, token=TOKEN)
    await client.open()
    try:
        yield client
    finally:
        await client.close()
