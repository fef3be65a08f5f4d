"""The gateway's own routes: workers, jobs, health."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from gateway.context import Ctx
from gateway.errors import NotFound

router = APIRouter()


@router.get("/gateway/workers")
async def workers(ctx: Ctx) -> Response:
    """Every worker of the farm (all nodes), as its owner last reported it."""
    return JSONResponse({"workers": await ctx.farm.registry()})


@router.get("/gateway/jobs/{job_id}")
async def job(job_id: str, ctx: Ctx) -> Response:
    record = await ctx.store.get(job_id)
    if record is None:
        raise NotFound(f"no job {job_id}", kind="not_found")
    body = {
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
        },
        "enqueued_at_ms": record.enqueued_at_ms,
        "claimed_at_ms": record.claimed_at_ms,
        "started_at_ms": record.started_at_ms,
        "finished_at_ms": record.finished_at_ms,
        "attempts": await ctx.store.attempts(job_id),
    }
    return JSONResponse(body)


@router.get("/healthz")
async def healthz() -> Response:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(ctx: Ctx) -> Response:
    problems = []
    try:
        await ctx.store.redis.ping()
    except Exception as exc:
        problems.append(f"redis unreachable: {exc}")
    if not ctx.farm.links.ready():
        problems.append("no worker ready")
    status = 503 if problems else 200
    return JSONResponse({"ready": not problems, "problems": problems}, status_code=status)
