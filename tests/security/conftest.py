"""Bad-input fixtures: two emulated workers (real processes) shared by the session, and the
gateway in front of them on a real port with its lifespan, over the session's real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import (
    as_external,
    gateway_settings,
    running_gateway,
    start_emulators,
    stop_emulators,
)
from workers.supervision.launch import FarmLayout, WorkerHandle


@pytest.fixture(scope="session")
def security_layout(tmp_path_factory: pytest.TempPathFactory) -> FarmLayout:
    root = tmp_path_factory.mktemp("security-farm")
    return FarmLayout(root / "workers", root / "input", 0.01)


@pytest.fixture(scope="session")
def security_workers(security_layout: FarmLayout) -> Iterator[list[WorkerHandle]]:
    handles = start_emulators(security_layout, ["bad0", "bad1"])
    yield handles
    stop_emulators(handles)


@pytest.fixture
async def gateway(
    redis_url: str,
    tmp_path: Path,
    security_workers: list[WorkerHandle],
    security_layout: FarmLayout,
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of a gateway in front of both workers (round robin, short leases)."""
    settings = gateway_settings(redis_url, tmp_path, policy="round_robin")
    handles = as_external(security_workers)
    async with (
        running_gateway(settings, handles, security_layout.input_dir) as url,
        httpx.AsyncClient(base_url=url, timeout=15) as http,
    ):
        yield http
