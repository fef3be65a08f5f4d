"""Where the time goes: job ledgers summed up (`/gateway/phases`)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from gateway.context import Ctx
from gateway.errors import BadRequest
from gateway.ledger import aggregate

router = APIRouter()


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
