"""The gateway served as `comfy-gateway serve` serves it: its strict HTTP protocol and
timeouts (`gateway.http_protocol`) and the workers' folder root for /view's real-path check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn

from gateway.app import create_app
from gateway.http_protocol import uvicorn_options
from gateway.settings import Settings
from tests.integration.conftest import _until_started, _until_stopped
from workers.supervision.launch import FarmLayout, WorkerHandle
from workers.supervision.ports import free_port


@asynccontextmanager
async def served_gateway(
    settings: Settings, handles: list[WorkerHandle], layout: FarmLayout
) -> AsyncIterator[tuple[str, int]]:
    """(base URL, port) of the gateway on a free port, inside this event loop."""
    app = create_app(
        settings, handles, input_dir=layout.input_dir, worker_root=layout.root, node="test"
    )
    port = free_port()
    options = uvicorn_options(
        settings.header_timeout_s, settings.keep_alive_timeout_s, settings.max_header_kib
    )
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, **options
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="gateway")
    await _until_started(server, task)
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        await _until_stopped(task)
