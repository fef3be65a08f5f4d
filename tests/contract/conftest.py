"""The server under test and clients of it.

Without COMFYUI_URL the checks run against the project's emulator, started here as a real
process; with COMFYUI_URL=http://host:port they run against that server (a real ComfyUI).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.contract import api
from tests.contract.servers import (
    FAST_TIME_SCALE,
    SLOW_TIME_SCALE,
    Server,
    emulator,
    real_server,
)

HERE = Path(__file__).parent


def _real_url() -> str | None:
    return os.environ.get("COMFYUI_URL") or None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if _real_url() is not None:
        return
    skip = pytest.mark.skip(reason="needs a real ComfyUI: set COMFYUI_URL")
    for item in items:
        if "comfyui" in item.keywords and item.path.is_relative_to(HERE):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    url = _real_url()
    if url is not None:
        yield real_server(url)
        return
    with emulator(tmp_path_factory.mktemp("emulator"), time_scale=FAST_TIME_SCALE) as started:
        yield started


@pytest.fixture(scope="session")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    url = _real_url()
    if url is not None:
        yield real_server(url)
        return
    with emulator(tmp_path_factory.mktemp("slow"), time_scale=SLOW_TIME_SCALE) as started:
        yield started


@pytest.fixture(scope="session")
def checkpoints(server: Server) -> list[str]:
    """The server's checkpoint names; the checks need two (a cache flush uses the second)."""
    names: list[str] = httpx.get(f"{server.url}/models/checkpoints").json()
    if len(names) < 2:
        pytest.fail(f"the contract checks need two checkpoints, the server has {names}")
    return names


@pytest.fixture
async def http(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as client:
        yield client


@pytest.fixture
async def slow_http(slow_server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=slow_server.url, timeout=30.0) as client:
        yield client


@pytest.fixture
def prefix() -> str:
    """A SaveImage prefix of its own, so file counters start at 00001 for this test."""
    return api.unique("contract")


@pytest.fixture
async def blocker(
    slow_server: Server, slow_http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> AsyncIterator[str]:
    """The id of a long prompt that is running on the slow server; on exit the pending queue
    is cleared and the prompt interrupted."""
    prompt = slow_server.long_prompt(checkpoints[0], prefix, seed=api.fresh_seed())
    body = await api.submit(slow_http, prompt)
    prompt_id: str = body["prompt_id"]
    try:
        await api.wait_running(slow_http, prompt_id)
        yield prompt_id
    finally:
        await slow_http.post("/queue", json={"clear": True})
        await slow_http.post("/interrupt", json={"prompt_id": prompt_id})
        await api.wait_history(slow_http, prompt_id)
