"""The emulator's app factory: builds one instance's state, its routes and its lifespan.

The lifespan starts the two background tasks a ComfyUI server runs (the prompt worker and the
WebSocket publisher) and stops them, then deletes the temp directory as ComfyUI does on exit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware

from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import CostModel
from workers.emulator.card.pagecache import SharedPageCache
from workers.emulator.card.residency import Residency
from workers.emulator.catalog import NodeCatalog
from workers.emulator.config import EmulatorConfig
from workers.emulator.execution import events
from workers.emulator.execution.engine import Card, Engine, World, hard_exit
from workers.emulator.execution.promptqueue import PromptQueue
from workers.emulator.execution.work import WorkOptions
from workers.emulator.faults import Faults
from workers.emulator.files import Dirs
from workers.emulator.http.logring import LogRing
from workers.emulator.http.middleware import ComfyMiddleware
from workers.emulator.http.routes import all_routes
from workers.emulator.http.routes.webroot import unmatched
from workers.emulator.http.state import Emulator
from workers.emulator.http.users import UserDir
from workers.emulator.http.ws import SocketHub

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


def build_emulator(
    config: EmulatorConfig,
    *,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    exit_process: Callable[[int], None] | None = None,
    logs: LogRing | None = None,
) -> Emulator:
    """One instance's state, wired together (directories are created, temp emptied). `logs`
    is the handler that records the process's log for `/internal/logs` (default: one that
    nothing logs to)."""
    dirs = Dirs.create(config.input_dir, config.output_dir, config.temp_dir)
    faults = Faults(clock)
    faults.update(config.faults)
    hub = SocketHub(config.server_features, clock=clock, sleep=sleep)
    queue = PromptQueue(on_change=lambda remaining: hub.emit(events.status(remaining)))
    catalog = NodeCatalog.load(config.model_files, dirs)
    flags = config.flags
    options = WorkOptions(
        time_scale=config.time_scale,
        previews=config.profile.previews and flags.preview_method != "none",
        preview_method=flags.preview_method,
        preview_size=config.preview_size,
        disable_metadata=config.disable_metadata,
        unload_after_prompt=config.disable_smart_memory,
    )
    engine = Engine(
        queue=queue,
        hub=hub,
        catalog=catalog.validation,
        card=Card(CostModel(config.profile, flags), residency_of(config, flags)),
        dirs=dirs,
        faults=faults,
        options=options,
        world=World(sleep=sleep, monotonic=clock, exit_process=exit_process or hard_exit),
    )
    return Emulator(
        config, dirs, catalog, queue, hub, engine, faults, clock(), logs or LogRing(), UserDir()
    )


def residency_of(config: EmulatorConfig, flags: LaunchFlags) -> Residency:
    """The instance's models, in its host's page cache when it shares one (`--page-cache`)."""
    folder = config.page_cache_dir
    page_cache = SharedPageCache(folder) if folder is not None else None
    return Residency(config.profile, flags, page_cache=page_cache)


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("emulator task %s died", task.get_name(), exc_info=task.exception())


def create_app(
    config: EmulatorConfig,
    *,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    exit_process: Callable[[int], None] | None = None,
    logs: LogRing | None = None,
) -> Starlette:
    """A Starlette app that answers as ComfyUI 0.3.64 (plus `/emulator/*` control routes)."""
    emulator = build_emulator(
        config, sleep=sleep, clock=clock, exit_process=exit_process, logs=logs
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(emulator.hub.run(), name="publisher"),
            asyncio.create_task(emulator.engine.run(), name="prompt-worker"),
        ]
        for task in tasks:
            task.add_done_callback(_log_crash)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            emulator.dirs.clean_temp()

    middleware = Middleware(
        ComfyMiddleware,
        refusing=emulator.faults.refusing,
        max_body_bytes=config.max_upload_bytes,
        cors_origin=config.cors_origin,
    )
    app = Starlette(
        routes=all_routes(),
        middleware=[middleware],
        exception_handlers={404: unmatched, 405: unmatched},
        lifespan=lifespan,
    )
    # aiohttp has no such redirect: `/object_info/` is a path no route takes.
    app.router.redirect_slashes = False
    app.state.emulator = emulator
    return app
