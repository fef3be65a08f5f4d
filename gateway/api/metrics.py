"""`GET /metrics`: Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.context import Ctx
from gateway.metrics import render

router = APIRouter()


@router.get("/metrics")
async def metrics(ctx: Ctx) -> Response:
    return Response(await render(ctx.farm, ctx.store), media_type=CONTENT_TYPE_LATEST)
