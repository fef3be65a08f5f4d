"""The server under test and clients of it.

Targets (environment):
- default: every check runs twice, against the project's emulator and through
  `comfy-gateway serve` in front of two emulated workers, both started here as real processes;
- CONTRACT_TARGET=emulator or CONTRACT_TARGET=gateway: only that one; with
  CONTRACT_TARGET=gateway and COMFY_GATEWAY_TEST_COMFYUI=/path/to/ComfyUI (Python:
  COMFY_GATEWAY_TEST_COMFYUI_PYTHON) the gateway's workers are real ComfyUI on the CPU, or
  all on one GPU with COMFY_GATEWAY_TEST_GPU=N;
- COMFYUI_URL=http://host:port: a running server (a real ComfyUI), nothing is started.

Checks marked `comfyui` need a real ComfyUI behind the server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.contract import api
from tests.contract.servers import (
    FAST_TIME_SCALE,
    SLOW_TIME_SCALE,
    ComfyCheckout,
    Server,
    emulator,
    gateway,
    real_server,
)

HERE = Path(__file__).parent
EMULATOR, GATEWAY, COMFYUI = "emulator", "gateway", "comfyui"
# The gateway of most checks runs two workers; the checks that hold the queue with one long
# prompt need every worker of their gateway busy, so that gateway has one.
GATEWAY_WORKERS = 2
SLOW_GATEWAY_WORKERS = 1


def _real_url() -> str | None:
    return os.environ.get("COMFYUI_URL") or None


def _comfyui_checkout() -> ComfyCheckout | None:
    path = os.environ.get("COMFY_GATEWAY_TEST_COMFYUI")
    if not path:
        return None
    python = os.environ.get("COMFY_GATEWAY_TEST_COMFYUI_PYTHON") or sys.executable
    gpu = os.environ.get("COMFY_GATEWAY_TEST_GPU", "")
    if gpu and not gpu.isdigit():
        raise pytest.UsageError(f"COMFY_GATEWAY_TEST_GPU must be a GPU index, not {gpu!r}")
    return ComfyCheckout(Path(path).resolve(), python, int(gpu) if gpu else None)


def targets() -> list[str]:
    if _real_url() is not None:
        return [COMFYUI]
    chosen = os.environ.get("CONTRACT_TARGET")
    if not chosen:
        return [EMULATOR, GATEWAY]
    if chosen not in (EMULATOR, GATEWAY):
        raise pytest.UsageError(f"CONTRACT_TARGET must be {EMULATOR} or {GATEWAY}, not {chosen}")
    return [chosen]


def _gateway_checkout() -> ComfyCheckout | None:
    """Real workers only when the gateway was chosen alone (a real farm takes minutes)."""
    return _comfyui_checkout() if os.environ.get("CONTRACT_TARGET") == GATEWAY else None


def _skip_reason(item: pytest.Item) -> str | None:
    """Why a check marked `comfyui` cannot run against this item's target, if it cannot."""
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("target") if callspec is not None else None
    if target == COMFYUI:
        return None
    if target == GATEWAY and _gateway_checkout() is not None:
        if "emulated" in getattr(item, "fixturenames", ()):
            return "compares the emulator with a ComfyUI reached directly (COMFYUI_URL)"
        return None
    return (
        "needs a real ComfyUI: set COMFYUI_URL, or CONTRACT_TARGET=gateway with "
        "COMFY_GATEWAY_TEST_COMFYUI"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "comfyui" not in item.keywords or not item.path.is_relative_to(HERE):
            continue
        reason = _skip_reason(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session", params=targets())
def target(request: pytest.FixtureRequest) -> str:
    """What the checks talk to: the emulator, a gateway, or a running ComfyUI."""
    name: str = request.param
    return name


def _start(target: str, work_dir: Path, *, time_scale: float, workers: int) -> Iterator[Server]:
    url = _real_url()
    if target == COMFYUI and url is not None:
        yield real_server(url)
    elif target == GATEWAY:
        checkout = _gateway_checkout()
        with gateway(work_dir, workers=workers, time_scale=time_scale, comfyui=checkout) as up:
            yield up
    else:
        with emulator(work_dir, time_scale=time_scale) as started:
            yield started


@pytest.fixture(scope="session")
def server(target: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work_dir = tmp_path_factory.mktemp(target)
    yield from _start(target, work_dir, time_scale=FAST_TIME_SCALE, workers=GATEWAY_WORKERS)


@pytest.fixture(scope="session")
def slow_server(target: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work_dir = tmp_path_factory.mktemp(f"{target}-slow")
    yield from _start(target, work_dir, time_scale=SLOW_TIME_SCALE, workers=SLOW_GATEWAY_WORKERS)


@pytest.fixture(scope="session")
def checkpoints(server: Server) -> list[str]:
    """The server's checkpoint names; the checks need two (a cache flush uses the second)."""
    names: list[str] = httpx.get(
        f"{server.url}/models/checkpoints", headers=server.operator_headers
    ).json()
    if len(names) < 2:
        pytest.fail(f"the contract checks need two checkpoints, the server has {names}")
    return names


@pytest.fixture
async def http(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=server.url, timeout=30.0, headers=server.operator_headers
    ) as client:
        yield client


@pytest.fixture
async def slow_http(slow_server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=slow_server.url, timeout=30.0, headers=slow_server.operator_headers
    ) as client:
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
        clear = {"clear": True}
        await slow_http.post("/queue", json=clear, headers=slow_server.operator_headers)
        await slow_http.post("/interrupt", json={"prompt_id": prompt_id})
        await api.wait_history(slow_http, prompt_id)
