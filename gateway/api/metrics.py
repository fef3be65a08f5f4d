"""`GET /metrics`: Prometheus text format (`gateway.metrics`)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.api.deps import Ctx
from gateway.metrics.scraped import render

router = APIRouter()


@router.get("/metrics")
async def metrics(ctx: Ctx) -> Response:
    body = await render(ctx.farm, ctx.store, ctx.hub, ctx.redis_health)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
