"""`comfy-gateway serve`: settings once, Redis, workers, then the HTTP server."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError

from gateway import preflight, tasks
from gateway.app import create_app
from gateway.data_dir_lock import DataDirBusy, DataDirLock
from gateway.farm.describe import vram_of
from gateway.http_protocol import uvicorn_options
from gateway.peers.identity import node_name
from gateway.redis_keeper import RedisHealth, RedisKeeper
from gateway.redis_server import EmbeddedRedis
from gateway.settings import Settings, WorkerConfig, resolve_workers
from gateway.shutdown import GatewayServer
from workers.gpus import visible_gpus
from workers.supervision.launch import FarmLayout, WorkerHandle, WorkerSpec
from workers.supervision.supervisor import Supervisor, emulated_vram
from workers.telemetry import Telemetry

log = logging.getLogger("gateway")


SWITCH_INTERVAL_S = 0.001


def serve_argv(port: int, data_dir: Path, *flags: str, config: Path | None = None) -> list[str]:
    """The command line that runs `comfy-gateway serve` in this Python on `port` with the data
    folder `data_dir`, the settings file `config` (if any) and then `flags` (as `build_parser`
    reads them)."""
    head = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
    head += ["--data-dir", str(data_dir)]
    if config is not None:
        head += ["--config", str(config)]
    return [*head, *flags]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="comfy-gateway serve",
        argument_default=argparse.SUPPRESS,
        description="One ComfyUI endpoint in front of a farm.",
    )
    add = parser.add_argument
    add("--host", help="listen address (default 127.0.0.1)")
    add("--port", type=int, help="listen port (default 8188)")
    add("--config", help="TOML file: settings and [[workers]]")
    add(
        "--redis-url", dest="redis_url", help="shared Redis; default: a private one in the data dir"
    )
    add("--data-dir", dest="data_dir", help="Redis AOF, worker folders, shared inputs (./.data)")
    add("--emulate", type=int, help="run N emulated workers")
    add("--emulate-profile", dest="emulate_profile", help="card profile of emulated workers")
    add("--time-scale", dest="time_scale", type=float, help="emulator time scale (1 = real)")
    add("--comfyui", help="a ComfyUI checkout: one worker per visible GPU")
    add("--comfyui-python", dest="comfyui_python", help="the Python that runs that ComfyUI")
    add(
        "--gpus",
        help="GPU slots to use, e.g. 0,1 (one worker each) or 0+1,2 (GPUs 0 and 1 together)",
    )
    add("--preload", help="checkpoints every worker warms up before taking jobs, e.g. a,b")
    add("--policy", help="placement policy (affinity, the default; sticky, round_robin, ...)")
    add(
        "--front-end-root",
        dest="front_end_root",
        help="folder of the web frontend served at / (default: comfyui-frontend-package)",
    )
    add("--log-level", dest="log_level", help="debug, info, warning")
    return parser


def load_settings(argv: Sequence[str]) -> Settings:
    flags: dict[str, Any] = vars(build_parser().parse_args(list(argv)))
    return Settings(**flags)


def main(argv: Sequence[str]) -> int:
    """Serve until stopped; exits at once (1) when another gateway holds the data dir, which
    stays locked for this process' lifetime."""
    try:
        settings = load_settings(argv)
    except ValidationError as exc:
        print(f"comfy-gateway serve: bad settings: {validation_errors(exc)}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as exc:
        print(f"comfy-gateway serve: bad settings: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A large decision by a policy with no steps runs on a thread (`dispatcher.decisions`);
    # handing the GIL back every 1 ms instead of 5 shortens the event loop's longest wait
    # meanwhile (18 to 7 ms on a busy machine, 4 ms on a quiet one: `python -m bench.looplag`).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    lock = DataDirLock(settings.data_dir.resolve())
    try:
        lock.acquire()
    except DataDirBusy as exc:
        print(f"comfy-gateway serve: {exc}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(run(settings))
    except KeyboardInterrupt:
        return 0
    finally:
        lock.release()


def make_supervisor(
    settings: Settings,
    workers: Sequence[WorkerConfig],
    layout: FarmLayout,
    telemetry: Telemetry,
    environ: Mapping[str, str],
) -> Supervisor:
    """The supervisor of these workers; each card's VRAM (NVML, else the emulated profile's)
    picks its default launch args."""

    def vram_mib(spec: WorkerSpec) -> float | None:
        known = vram_of(telemetry.snapshot(), spec.gpu_indices)
        return known[1] if known is not None else emulated_vram(spec)

    specs = [worker.spec() for worker in workers]
    return Supervisor(
        specs, layout, environ=environ, settings=settings.supervision(), vram_of=vram_mib
    )


async def run(settings: Settings) -> int:
    # Absolute: redis-server and the workers resolve paths from their own working dirs.
    settings = settings.model_copy(update={"data_dir": settings.data_dir.resolve()})
    redis_health: Callable[[], RedisHealth] | None = None
    workers = resolve_workers(settings, visible_gpus(os.environ))
    if not workers:
        log.error("no workers: %s", no_workers_reason(settings))
        return 2
    if found := preflight.problems(settings, workers):
        for problem in found:
            log.error("cannot serve: %s", problem)
        return 2
    async with AsyncExitStack() as stack:
        if settings.redis_url is None:
            redis = EmbeddedRedis(
                settings.data_dir / "redis",
                appendfsync=settings.appendfsync,
                maxmemory_mib=settings.redis_maxmemory_mib,
            )
            redis.start()  # in this thread: the server dies with the thread that started it
            stack.callback(redis.stop)
            keeper = RedisKeeper(
                redis, settings.restart.policy(), interval_s=settings.supervise_interval_s
            )
            kept = asyncio.create_task(keeper.run(), name="redis-keeper")
            stack.push_async_callback(tasks.stop, [kept])
            redis_health = keeper.health
            settings = settings.model_copy(update={"redis_url": redis.url})
        layout = FarmLayout(
            settings.data_dir / "workers", settings.data_dir / "input", settings.time_scale
        )
        telemetry = Telemetry(interval_s=settings.telemetry_interval_s)
        if telemetry.open():
            telemetry.sample()
        else:
            log.info("no GPU telemetry: %s", telemetry.reason)
        supervisor = make_supervisor(settings, workers, layout, telemetry, os.environ)
        stack.push_async_callback(supervisor.stop_all)
        handles = await supervisor.start_all()
        if not any(handle.ready for handle in handles):
            _report_failures(supervisor, handles)
            return 1
        app = create_app(
            settings,
            handles,
            input_dir=layout.input_dir,
            worker_root=layout.root,
            node=node_name(settings.data_dir),
            supervisor=supervisor,
            telemetry=telemetry,
            redis_health=redis_health,
        )
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            access_log=False,
            **uvicorn_options(
                settings.header_timeout_s, settings.keep_alive_timeout_s, settings.max_header_kib
            ),
        )
        log.info(
            "gateway on http://%s:%d with %d workers, redis %s",
            settings.host,
            settings.port,
            len(handles),
            settings.redis_url,
        )
        server = GatewayServer(config, drain=_drainer(app, settings.drain_grace_s))
        freeze_heap()
        await server.serve()
        if not server.started:
            return 1  # the app did not start (its error is logged): e.g. a worker name taken
    return 0


def freeze_heap() -> None:
    """Keep what is alive now (the modules, the app, the supervisor: some 87,000 objects) out
    of the garbage collector's full passes, which otherwise walk all of it each time, blocking
    the event loop for 45 ms on this project's 2-core machines; a full pass then walks only
    what was made since. Once per process, when it is about to serve."""
    gc.collect()
    gc.freeze()


def validation_errors(exc: ValidationError) -> str:
    """Pydantic's errors as `field: reason (got value)`, one per line after the first."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ()))
        reason = str(error.get("msg", "")).removeprefix("Value error, ")
        got = f" (got {error['input']!r})" if where and "input" in error else ""
        lines.append(f"{where}: {reason}{got}" if where else reason)
    return "\n  ".join(lines)


def no_workers_reason(settings: Settings) -> str:
    if settings.comfyui is not None:
        return (
            "comfyui runs one worker per visible GPU and no GPU is visible here (NVML,"
            " CUDA_VISIBLE_DEVICES): name the GPU slots with --gpus 0,1"
        )
    return "configure [[workers]], pass --comfyui PATH with --gpus, or --emulate N"


def _drainer(app: FastAPI, grace_s: float) -> Callable[[], Awaitable[None]]:
    async def drain() -> None:
        await app.state.context.farm.drain.node(grace_s)

    return drain


def _report_failures(supervisor: Supervisor, handles: Sequence[WorkerHandle]) -> None:
    log.error("no worker became ready")
    for handle in handles:
        log.error("worker %s: %s", handle.name, handle.error or "not ready")
        for line in supervisor.log_tail(handle.name)[-10:]:
            log.error("  %s| %s", handle.name, line)
