"""The gateway's own routes: workers (and the operator's verbs on them), jobs, health."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from gateway.api.deps import Context, Ctx, read_body, require_token
from gateway.dispatch.links import WorkerLink
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.jobs.models import JobState
from gateway.recovery.leases import CRASHED
from gateway.settings import NAME_RE, WorkerConfig

router = APIRouter()


@router.get("/gateway/workers")
async def workers(ctx: Ctx) -> Response:
    """Every worker of the farm (all nodes), as its owner last reported it."""
    return JSONResponse({"workers": await ctx.farm.registry.records()})


@router.get("/gateway/nodes")
async def nodes(ctx: Ctx) -> Response:
    """The gateway nodes of the farm: this one, and the live others as their last heartbeat
    showed them (URL, workers and their states, seconds since)."""
    membership = ctx.membership
    now_ms = ctx.store.now_ms()
    others = [
        {
            "name": peer.name,
            "url": peer.url,
            "workers": dict(peer.workers),
            "heartbeat_age_s": round((now_ms - peer.heartbeat_ms) / 1000, 3),
        }
        for peer in membership.peers.values()
    ]
    this = {
        "name": membership.node,
        "url": membership.url,
        "workers": {link.name: str(link.state) for link in ctx.farm.links},
        "standing": membership.standing,
        "problem": membership.problem,
    }
    return JSONResponse({"node": this, "others": others})


@router.get("/gateway/workers/{name}")
async def worker(name: str, ctx: Ctx) -> Response:
    """One worker; for a worker of this node, fresh, with the last lines of its log."""
    link = ctx.farm.link(name)
    if link is None:
        for record in await ctx.farm.registry.records():
            if record["name"] == name:
                return JSONResponse(record)
        raise NotFound(f"no worker {name}", kind="not_found")
    body = ctx.farm.registry.describe(link, ctx.store.now_ms())
    supervisor = ctx.farm.supervisor
    body["log_tail"] = supervisor.log_tail(name) if supervisor is not None else []
    return JSONResponse(body)


@router.post("/gateway/workers/{name}/restart")
async def restart_worker(name: str, request: Request, ctx: Ctx) -> Response:
    """Restart its process now; the jobs it held go back to the queue (not as failures)."""
    link = _managed(ctx, request, name, "restarting a worker")
    assert ctx.farm.supervisor is not None
    await ctx.farm.supervisor.restart(link.name, "restart asked by an operator", failure=False)
    return JSONResponse({"worker": name, "restarting": True})


@router.post("/gateway/workers/{name}/relaunch")
async def relaunch_worker(name: str, request: Request, ctx: Ctx) -> Response:
    """Restart its process with other launch args and/or in another group:
    `{"args": [...], "group": "..."}` (either may be left out: kept). What it held goes back
    to the queue (drain it first to let it finish); `previous` says what to restore."""
    link = _managed(ctx, request, name, "relaunching a worker")
    assert ctx.farm.supervisor is not None
    body = await _json_object(request)
    spec = link.handle.spec
    try:
        config = WorkerConfig(
            name=spec.name,
            emulate=spec.emulate,
            args=body.get("args", list(spec.args)),
            group=body.get("group", spec.group),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        raise BadRequest(f"cannot relaunch {name}: {error['msg']}", kind="invalid_launch") from None
    if not NAME_RE.match(config.group):
        raise BadRequest(
            f"group {config.group!r} must match {NAME_RE.pattern}", kind="invalid_group"
        )
    previous = {"args": list(spec.args), "group": spec.group}
    new = replace(spec, args=config.args, group=config.group)
    await ctx.farm.supervisor.relaunch(name, new, "relaunch asked by an operator")
    return JSONResponse(
        {"worker": name, "args": list(new.args), "group": new.group, "previous": previous}
    )


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await read_body(request, 64 * 1024)
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise BadRequest("the body must be a JSON object", kind="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", kind="invalid_json")
    return body


@router.post("/gateway/workers/{name}/drain")
async def drain_worker(name: str, request: Request, ctx: Ctx) -> Response:
    """Give it no new jobs; what it runs finishes, what waits on it goes back to the queue."""
    link = _link(ctx, request, name, "draining a worker")
    await ctx.farm.drain.worker(link)
    return JSONResponse({"worker": name, "draining": True, "held": len(link.held)})


@router.post("/gateway/workers/{name}/resume")
async def resume_worker(name: str, request: Request, ctx: Ctx) -> Response:
    """End a drain; start a worker that failed or stopped again, with a clean history."""
    link = _link(ctx, request, name, "resuming a worker")
    ctx.farm.drain.resume(link)
    supervisor = ctx.farm.supervisor
    started = supervisor.resume(name) if supervisor and link.handle.managed else False
    return JSONResponse({"worker": name, "draining": False, "started": started})


def _link(ctx: Context, request: Request, name: str, what: str) -> WorkerLink:
    require_token(ctx, request, what)
    link = ctx.farm.link(name)
    if link is None:
        raise NotFound(f"no worker {name} on this gateway node", kind="not_found")
    return link


def _managed(ctx: Context, request: Request, name: str, what: str) -> WorkerLink:
    link = _link(ctx, request, name, what)
    if ctx.farm.supervisor is None or not link.handle.managed:
        raise Conflict(f"worker {name} is not started by this gateway", kind="not_managed")
    return link


@router.get("/gateway/jobs/{job_id}")
async def job(job_id: str, ctx: Ctx) -> Response:
    """The job's record: state, placement, every attempt and how often its worker crashed
    running it; a quarantined job also shows its workflow (`prompt`), kept for inspection."""
    record = await ctx.store.get(job_id)
    if record is None:
        raise NotFound(f"no job {job_id}", kind="not_found")
    attempts = await ctx.store.attempts(job_id)
    body: dict[str, Any] = {
        "prompt_id": record.job_id,
        "state": record.state.value,
        "number": record.number,
        "priority": record.priority,
        "client_id": record.client_id,
        "worker": record.worker,
        "attempt": record.attempt,
        "failures": record.failures,
        "placement": {
            "checkpoint": record.placement.checkpoint,
            "model_keys": list(record.placement.model_keys),
            "work_units": record.placement.work_units,
            "group": record.placement.group,
            "eligible": record.placement.eligible,
            "experiment": record.placement.experiment,
        },
        "enqueued_at_ms": record.enqueued_at_ms,
        "claimed_at_ms": record.claimed_at_ms,
        "started_at_ms": record.started_at_ms,
        "finished_at_ms": record.finished_at_ms,
        "attempts": attempts,
        "crashes": sum(1 for a in attempts if a.get("outcome") in (CRASHED, "quarantined")),
        "ledger": None if record.ledger_json is None else json.loads(record.ledger_json),
    }
    if record.state is JobState.QUARANTINED:
        body["prompt"] = json.loads(record.prompt_json)
    return JSONResponse(body)


@router.get("/healthz")
async def healthz(ctx: Ctx) -> Response:
    """Alive: 503 only when the embedded Redis was given up on (restarting the gateway is the
    remedy); a Redis being restarted is still alive (`/readyz` says it is not ready)."""
    if ctx.redis_health is None:
        return JSONResponse({"status": "ok"})
    health = ctx.redis_health()
    redis = {"state": health.state, "restarts": health.restarts, "reason": health.reason}
    status = "failed: embedded redis given up" if health.failed else "ok"
    return JSONResponse(
        {"status": status, "redis": redis}, status_code=503 if health.failed else 200
    )


@router.get("/readyz")
async def readyz(ctx: Ctx) -> Response:
    problems = []
    health = ctx.redis_health() if ctx.redis_health is not None else None
    if health is not None and health.state != "ready":
        problems.append(f"embedded redis {health.state}: {health.reason}")
    try:
        await ctx.store.redis.ping()
    except Exception as exc:
        problems.append(f"redis unreachable: {exc}")
    if not ctx.membership.standing:
        reason = ctx.membership.problem or "its registration in Redis is not renewed"
        problems.append(f"not claiming jobs: {reason}")
    if ctx.farm.draining:
        problems.append("draining: this gateway is shutting down")
    elif not ctx.farm.links.accepting():
        problems.append("no worker ready")
    status = 503 if problems else 200
    return JSONResponse({"ready": not problems, "problems": problems}, status_code=status)
