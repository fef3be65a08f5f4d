"""Where the time goes and which configuration wins: job ledgers summed up
(`/gateway/phases`), A/B experiments (`/gateway/experiments`) and their reports (`/gateway/ab`)."""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from gateway.api.deps import Context, Ctx, read_body, require_token
from gateway.errors import BadRequest, Conflict, NotFound, Unavailable
from gateway.ledger import abreport, aggregate
from gateway.ledger.experiments import Experiment, Experiments, describe

router = APIRouter()
MAX_EXPERIMENT_BYTES = 64 * 1024


@router.get("/gateway/phases")
async def phases(ctx: Ctx, by: str = "worker", limit: int | None = None) -> Response:
    """Stats per phase of the latest jobs (`limit`, default: as many as the history keeps) by
    worker, group, family or shape, cold and warm apart, and the diagnostic rule per worker
    and workflow shape."""
    if by not in aggregate.KEYS:
        raise BadRequest(f"by must be one of {', '.join(aggregate.KEYS)}", kind="invalid_query")
    ledgers = await ctx.store.ledgers(limit or ctx.settings.history_max_items)
    return JSONResponse(
        {
            "by": by,
            "jobs": len(ledgers),
            "groups": aggregate.by(ledgers, by),
            "diagnosis": aggregate.diagnose(ledgers),
        }
    )


@router.get("/gateway/experiments")
async def experiments(ctx: Ctx) -> Response:
    """Every experiment, configured (`source: config`) or added here (`source: api`)."""
    registry = _registry(ctx)
    listed = [describe(e, e.name in registry.configured) for e in await registry.all()]
    return JSONResponse({"experiments": listed})


@router.post("/gateway/experiments")
async def add_experiment(request: Request, ctx: Ctx) -> Response:
    """Add (or replace) an experiment: `{"name", "groups", "weights"?, "shapes"?}`."""
    require_token(ctx, request, "adding an experiment")
    body = await read_body(request, MAX_EXPERIMENT_BYTES)
    try:
        experiment = Experiment.model_validate_json(body)
    except ValidationError as exc:
        message = f"invalid experiment: {_first_error(exc)}"
        raise BadRequest(message, kind="invalid_experiment") from None
    known = set(ctx.farm.groups().values())
    unknown = [g for g in experiment.groups if g not in known]
    if unknown:
        raise BadRequest(
            f"no worker in group {', '.join(map(repr, unknown))} "
            f"(groups: {', '.join(sorted(known))})",
            kind="invalid_group",
        )
    if not await _registry(ctx).add(experiment):
        raise Conflict(f"experiment {experiment.name} is set in the config file", kind="configured")
    return JSONResponse(describe(experiment, configured=False))


@router.delete("/gateway/experiments/{name}")
async def remove_experiment(name: str, request: Request, ctx: Ctx) -> Response:
    """Stop splitting jobs for an experiment added here (its jobs' ledgers stay)."""
    require_token(ctx, request, "removing an experiment")
    registry = _registry(ctx)
    if name in registry.configured:
        raise Conflict(f"experiment {name} is set in the config file", kind="configured")
    if not await registry.remove(name):
        raise NotFound(f"no experiment {name}", kind="not_found")
    return JSONResponse({"removed": name})


@router.get("/gateway/ab")
async def ab(ctx: Ctx, experiment: str | None = None, jobs: bool = False) -> Response:
    """The report of one experiment: stats per group, ratios against the baseline group with
    intervals and tests, and a one-line verdict (`gateway.ledger.abreport`); `jobs=true` adds
    each job's group, temperature and phase seconds (what the plot of `ab report` draws)."""
    if not experiment:
        raise BadRequest("name the experiment: /gateway/ab?experiment=NAME", kind="invalid_query")
    found = await _registry(ctx).get(experiment)
    if found is None:
        raise NotFound(f"no experiment {experiment}", kind="not_found")
    ledgers = await ctx.store.ledgers(ctx.settings.history_max_items)
    # The bootstrap takes a while (about 0.1 s per 100 jobs): off the event loop.
    body = await asyncio.to_thread(abreport.report, found, ledgers, jobs=jobs)
    return Response(json.dumps(body), media_type="application/json")


def _registry(ctx: Context) -> Experiments:
    if ctx.experiments is None:
        raise Unavailable("experiments are not available on this gateway", kind="not_ready")
    return ctx.experiments


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error.get('msg')}"
