"""In-process emulator apps: the app factory, its lifespan, and an httpx client over ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from workers.emulator.card.profiles import Profile, load_profile
from workers.emulator.config import EmulatorConfig
from workers.emulator.http.app import create_app
from workers.emulator.http.state import Emulator

CHECKPOINTS = ("A.safetensors", "B.safetensors", "sd_xl_base_1.0.safetensors")
Factory = Callable[..., Awaitable[tuple[httpx.AsyncClient, Emulator]]]


def no_warmup_profile() -> Profile:
    """The H200 profile without its first-job penalty (tests that run at time scale 1)."""
    return replace(load_profile("h200"), first_job_penalty_s=0.0)


def make_config(tmp_path: Path, **overrides: Any) -> EmulatorConfig:
    config = EmulatorConfig(
        profile=load_profile("h200"),
        input_dir=tmp_path / "input",
        output_dir=tmp_path / "output",
        temp_dir=tmp_path / "temp",
        time_scale=0.001,
        checkpoints=CHECKPOINTS,
    )
    return replace(config, **overrides)


@pytest.fixture
async def make_app(tmp_path: Path) -> AsyncIterator[Factory]:
    """Start in-process apps (lifespan running); each is stopped at the end of the test."""
    stack: list[tuple[Starlette, httpx.AsyncClient, Any]] = []

    async def start(**overrides: Any) -> tuple[httpx.AsyncClient, Emulator]:
        hooks = {
            k: overrides.pop(k)
            for k in ("sleep", "clock", "exit_process", "logs")
            if k in overrides
        }
        app = create_app(make_config(tmp_path, **overrides), **hooks)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://emulator")
        stack.append((app, client, lifespan))
        return client, app.state.emulator

    yield start
    for _, client, lifespan in reversed(stack):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


@pytest.fixture
async def app(make_app: Factory) -> tuple[httpx.AsyncClient, Emulator]:
    return await make_app()


@pytest.fixture
def client(app: tuple[httpx.AsyncClient, Emulator]) -> httpx.AsyncClient:
    return app[0]


@pytest.fixture
def emulator(app: tuple[httpx.AsyncClient, Emulator]) -> Emulator:
    return app[1]


async def wait_for(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Poll `check()` until it returns something truthy."""
    for _ in range(int(timeout_s / 0.005)):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in time")


async def history_entry(
    client: httpx.AsyncClient, prompt_id: str, timeout_s: float = 10.0
) -> dict[str, Any]:
    """Wait for a prompt's history entry and return it."""
    for _ in range(int(timeout_s / 0.005)):
        found: dict[str, Any] = (await client.get(f"/history/{prompt_id}")).json()
        if found:
            entry: dict[str, Any] = found[prompt_id]
            return entry
        await asyncio.sleep(0.005)
    raise AssertionError(f"no history entry for {prompt_id}")


async def run_to_history(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """POST a prompt and wait for its history entry."""
    response = await client.post("/prompt", json=body)
    assert response.status_code == 200, response.text
    return await history_entry(client, response.json()["prompt_id"])
