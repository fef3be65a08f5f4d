"""The app factory: routes, error mapping, and a lifespan that owns every resource."""

from __future__ import annotations

import importlib
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from gateway.api import (
    compat,
    dashboard,
    farm,
    files,
    frontend,
    info,
    jobs,
    ledger,
    metrics,
    proxy,
    templates,
    userdata,
    ws,
)
from gateway.api.auth import TokenGuard
from gateway.api.browsers import Browsers
from gateway.api.deps import Context
from gateway.api.file_roots import FileRoots
from gateway.api.intake import Acceptor, Checks
from gateway.api.origin import OriginGuard
from gateway.api.template_folders import find_template_folders
from gateway.api.user_store import UserData
from gateway.api.webroot import find_web_root
from gateway.dispatch.links import Links, WorkerLink
from gateway.dispatch.relay import relay_sid
from gateway.errors import GatewayError, Unavailable, error_body
from gateway.events.hub import Hub
from gateway.farm.catalog import FarmCatalog
from gateway.farm.node import Farm, FarmSettings, LocalWorkers
from gateway.jobs.keys import Keys
from gateway.jobs.models import NewJob
from gateway.jobs.store import JobStore, StoreLimits
from gateway.ledger.experiments import Experiments
from gateway.peers.client import PeerClient
from gateway.peers.membership import Membership, NodeAddress
from gateway.recovery.liveness import LivenessSettings
from gateway.redis_keeper import RedisHealth
from gateway.scheduler.policy import Policy, make_policy
from gateway.scheduler.timescale import in_emulated_time
from gateway.settings import Settings
from workers.client import ComfyClient, WorkerError
from workers.supervision.launch import WorkerHandle
from workers.supervision.supervisor import Supervisor
from workers.telemetry import Telemetry

log = logging.getLogger(__name__)


def load_policy(name: str) -> Policy:
    """Pick a registered policy by name (the scheduler package registers its own on import)."""
    importlib.import_module("gateway.scheduler.policies.baselines")
    return make_policy(name)


def create_app(
    settings: Settings,
    handles: Sequence[WorkerHandle],
    *,
    input_dir: Path | None = None,
    worker_root: Path | None = None,
    node: str | None = None,
    supervisor: Supervisor | None = None,
    telemetry: Telemetry | None = None,
    redis_health: Callable[[], RedisHealth] | None = None,
) -> FastAPI:
    """A gateway over these workers; nothing is connected until the lifespan starts.

    With a `supervisor` (which started `handles`), the lifespan runs its reconcile loop and,
    at shutdown, stops its children and puts back in the queue what they held. Telemetry is
    sampled in the background (a fresh `Telemetry` unless one is given). `worker_root` is the
    `FarmLayout.root` of the workers on this host, whose files /view checks by real path.
    """
    if settings.redis_url is None:
        raise ValueError("create_app needs settings.redis_url (serve starts Redis otherwise)")
    policy = in_emulated_time(load_policy(settings.policy), settings.time_scale)
    node_name = node or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        workers = _Workers(handles, supervisor, telemetry)
        async with _resources(settings, workers, policy, input_dir, node_name) as context:
            context.redis_health = redis_health
            context.file_roots = FileRoots(input_dir, worker_root)
            context.web_root = find_web_root(settings.front_end_root)
            context.templates = find_template_folders()
            app.state.context = context
            yield

    app = FastAPI(
        title="comfy-gateway",
        lifespan=lifespan,
        docs_url="/gateway/docs",
        redoc_url=None,
        openapi_url="/gateway/openapi.json",
    )
    for router in (compat.router, info.router, files.router, userdata.router, ws.router):
        app.include_router(router)
        app.include_router(router, prefix="/api")
    app.include_router(jobs.router)
    app.include_router(frontend.router)
    app.include_router(templates.router)
    app.include_router(farm.router)
    app.include_router(dashboard.router)
    app.include_router(ledger.router)
    app.include_router(metrics.router)
    app.include_router(proxy.router)  # last: whatever no other route takes
    app.add_middleware(TokenGuard, token=settings.auth_token)
    app.add_middleware(OriginGuard)  # outermost: a cross-site request is refused first
    _add_error_handlers(app)
    return app


@dataclass(frozen=True)
class _Workers:
    handles: Sequence[WorkerHandle]
    supervisor: Supervisor | None
    telemetry: Telemetry | None


@asynccontextmanager
async def _resources(
    settings: Settings, workers: _Workers, policy: Policy, input_dir: Path | None, node: str
) -> AsyncIterator[Context]:
    assert settings.redis_url is not None
    keys = Keys(settings.redis_prefix)

    async def on_connect(connection: Any) -> None:
        # Every new connection reads Redis' run id: a restart is seen before any claim.
        await the_farm.restarts.on_connect(connection)

    # A stuck reply must fail, not hang a request forever (no blocking commands here).
    # With a socket_timeout, redis-py sends through asyncio.wait_for, which can lose a
    # cancel on Python 3.11: background loops stop through gateway.tasks for that reason.
    redis = aioredis.Redis.from_pool(
        _pool(
            settings,
            decode_responses=True,
            socket_timeout=10,
            socket_connect_timeout=5,
            redis_connect_func=on_connect,
        )
    )
    channel_redis = aioredis.Redis.from_pool(_pool(settings))
    store = JobStore(redis, keys, _limits(settings), clock=time.time)
    hub = Hub(channel_redis, keys.events, store.queue_remaining)
    links = Links([_link(handle, settings) for handle in workers.handles])
    catalog = FarmCatalog(input_dir)
    telemetry = workers.telemetry or Telemetry(interval_s=settings.telemetry_interval_s)
    the_farm = Farm(
        store,
        hub,
        links,
        policy,
        catalog,
        settings=FarmSettings(
            node=node,
            lease_s=settings.lease_s,
            stall_timeout_s=settings.stall_timeout_s,
            capacity=1 + settings.prefetch,
            interrupt_grace_s=settings.interrupt_grace_s,
            time_scale=settings.time_scale,
            journal_s=settings.accept_journal_s,
            quarantine_after=settings.quarantine_after_crashes,
            catalog_refresh_s=settings.catalog_refresh_s,
            liveness=LivenessSettings(
                settings.liveness_interval_s, settings.liveness_timeout_s, settings.hang_after_s
            ),
            warm_up_s=settings.warmup_timeout_s if settings.warm_cold_workers else None,
        ),
        local=LocalWorkers(workers.supervisor, telemetry),
    )
    if not settings.ledger:
        the_farm.outcomes.ledgers = None

    async def accepted(job: NewJob) -> None:
        the_farm.metrics.job_accepted(job.placement.checkpoint)
        # ComfyUI announces its longer queue before it answers, and before the prompt runs.
        await hub.announce_queue()
        if job.front or job.priority > 0 or job.number is not None:
            await the_farm.dispatcher.place_now()  # it may overtake a prompt sent ahead
        else:
            the_farm.dispatcher.arrived()

    async def admit() -> None:
        if the_farm.draining and not await the_farm.registry.other_node_serving():
            raise Unavailable(
                "this gateway is shutting down and no other gateway node serves the farm; "
                "retry shortly",
                kind="draining",
            )

    membership = _membership(settings, the_farm, catalog, node)
    peers = PeerClient(node, settings.auth_token, timeout_s=settings.worker_request_timeout_s)

    experiments = Experiments(redis, keys, settings.experiments)
    acceptor = Acceptor(
        store,
        catalog,
        membership.groups,
        accepted,
        checks=Checks(
            admit=admit,
            max_job_work=settings.max_job_work,
            refresh_catalog=the_farm.catalog_refresh.farm_unless_recent,
        ),
        journal=the_farm.journal,
        experiments=experiments,
    )
    try:
        await telemetry.start()
        await hub.start()
        await membership.start()
        await the_farm.start()
        users = UserData(settings.data_dir / "user")
        browsers = Browsers(redis, keys, settings.job_ttl_s, store.now_ms)
        yield Context(
            settings,
            store,
            hub,
            the_farm,
            catalog,
            acceptor,
            membership,
            peers,
            users,
            browsers,
            experiments=experiments,
        )
    finally:
        await the_farm.stop()
        await membership.stop()
        await peers.aclose()
        await telemetry.stop()
        await hub.stop()
        await redis.aclose()
        await channel_redis.aclose()


def _membership(settings: Settings, the_farm: Farm, catalog: FarmCatalog, node: str) -> Membership:
    """This node in the farm, wired to what it steers: the dispatcher sees the other nodes'
    workers and claims only while this node stands, as the workers' live events are published
    only then; another node's announcement of the queue wakes the dispatcher."""
    dispatcher = the_farm.dispatcher
    membership = Membership(
        the_farm.store,
        the_farm.links,
        catalog,
        the_farm.outcomes,
        address=NodeAddress(node, settings.advertised_url, settings.node_ttl_s),
        local_lanes=dispatcher.lanes,
    )
    dispatcher.remote_lanes = membership.lanes
    dispatcher.standing = the_farm.hub.standing = lambda: membership.standing
    the_farm.hub.on_remote_queue = dispatcher.wake
    return membership


def _pool(settings: Settings, **options: Any) -> aioredis.BlockingConnectionPool:
    """Connections to Redis, at most `redis_max_connections`: past that a command waits for
    a free one, up to `redis_pool_timeout_s` (then it fails as Redis being unavailable, 503),
    where redis-py's default pool refuses at once past 100 (a burst of WebSockets or POSTs)."""
    assert settings.redis_url is not None
    return aioredis.BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_pool_timeout_s,
        **options,
    )


def _limits(settings: Settings) -> StoreLimits:
    return StoreLimits(
        max_failures=settings.max_attempts,
        history_max_items=settings.history_max_items,
        job_ttl_s=settings.job_ttl_s,
        idempotency_ttl_s=settings.idempotency_ttl_s,
        lease_s=settings.lease_s,
    )


def _link(handle: WorkerHandle, settings: Settings) -> WorkerLink:
    client = ComfyClient(handle.url, timeout_s=settings.worker_request_timeout_s)
    return WorkerLink(handle=handle, client=client, sid=relay_sid(handle.name))


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        return _error_response(request, exc)

    @app.exception_handler(aioredis.ConnectionError)
    @app.exception_handler(aioredis.TimeoutError)
    async def redis_down(request: Request, exc: Exception) -> JSONResponse:
        log.warning("redis unavailable: %s", exc)
        error = Unavailable("the job store (Redis) is unavailable; retry", kind="unavailable")
        return _error_response(request, error)

    @app.exception_handler(aioredis.ResponseError)
    async def redis_refused(request: Request, exc: Exception) -> JSONResponse:
        # A write refused at maxmemory (noeviction) is `OOM ...`, or inside a script
        # `Error running script ... -OOM ...`: nothing was written, the client may retry.
        if "OOM command not allowed" not in str(exc):
            log.error("redis refused a command: %s", exc)
            return _error_response(request, GatewayError("the job store (Redis) failed"))
        log.warning("redis refuses writes: %s", exc)
        error = Unavailable(
            "the job store (Redis) is full (its maxmemory); nothing is evicted, retry later",
            kind="store_full",
        )
        return _error_response(request, error)

    @app.exception_handler(WorkerError)
    async def worker_down(request: Request, exc: WorkerError) -> JSONResponse:
        error = Unavailable(f"worker unavailable: {exc}", kind="worker_unavailable")
        return _error_response(request, error)


def _error_response(request: Request, exc: GatewayError) -> JSONResponse:
    headers = {"Retry-After": "1"} if exc.retryable else None
    body = error_body(request.url.path, exc)
    return JSONResponse(body, status_code=exc.status, headers=headers)
