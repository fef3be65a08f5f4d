"""ComfyUI's catalogue routes, merged over the workers: object_info, system_stats, models..."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from gateway.api.deps import Context, Ctx
from gateway.dispatch.links import WorkerLink
from gateway.errors import Unavailable
from workers.client import WorkerError, WorkerNoAnswer

router = APIRouter()


@router.get("/object_info")
async def object_info(ctx: Ctx) -> Response:
    return Response(ctx.catalog.object_info_json, media_type="application/json")


@router.get("/object_info/{class_type}")
async def object_info_class(class_type: str, ctx: Ctx) -> Response:
    info = ctx.catalog.class_info(class_type)
    return JSONResponse({} if info is None else {class_type: info})


@router.get("/system_stats")
async def system_stats(ctx: Ctx) -> Response:
    answers = await _ask_all(ctx, "/system_stats")
    if not answers:
        raise Unavailable("no worker answered", kind="not_ready")
    system = dict(answers[0][1].get("system") or {})
    devices = [
        {**device, "worker": link.name, "group": link.group}
        for link, body in answers
        for device in body.get("devices") or []
    ]
    return JSONResponse({"system": system, "devices": devices})


@router.get("/models")
async def models(ctx: Ctx) -> Response:
    return JSONResponse(_union(body for _, body in await _ask_all(ctx, "/models")))


@router.get("/models/{folder}")
async def models_folder(folder: str, ctx: Ctx) -> Response:
    answers = await _ask_all(ctx, f"/models/{quote(folder, safe='')}")
    if not answers:
        return Response(status_code=404)  # ComfyUI: a bare 404 for an unknown folder
    return JSONResponse(sorted(_union(body for _, body in answers)))


@router.get("/embeddings")
async def embeddings(ctx: Ctx) -> Response:
    return JSONResponse(_union(body for _, body in await _ask_all(ctx, "/embeddings")))


@router.get("/extensions")
async def extensions(ctx: Ctx) -> Response:
    """The web root's scripts, then the custom nodes' scripts of every worker."""
    own = ctx.web_root.extensions() if ctx.web_root is not None else []
    answers = [body for _, body in await _ask_all(ctx, "/extensions")]
    return JSONResponse(_union([own, *answers]))


@router.get("/global_subgraphs")
async def global_subgraphs(ctx: Ctx) -> Response:
    """The subgraph blueprints custom nodes ship, by id, of every worker (`{}` from workers
    too old to serve them)."""
    merged: dict[str, Any] = {}
    for _, body in await _ask_all(ctx, "/global_subgraphs"):
        if isinstance(body, dict):
            merged = {**body, **merged}
    return JSONResponse(merged)


@router.get("/features")
async def features(ctx: Ctx) -> Response:
    merged: dict[str, Any] = {}
    for _, body in await _ask_all(ctx, "/features"):
        merged = {**body, **merged}
    merged["supports_preview_metadata"] = True
    merged["max_upload_size"] = ctx.settings.max_body_bytes
    return JSONResponse(merged)


async def _ask_all(ctx: Context, path: str) -> list[tuple[WorkerLink, Any]]:
    """Every ready worker's answer to GET `path`, each given `liveness_timeout_s` to answer:
    one too slow is served from its last answer to `path`, left out without one. Workers
    that refuse or are out of the ready set (hung) are left out. Never waits longer than
    that timeout for the slowest worker."""
    links = ctx.farm.links.ready()
    timeout_s = ctx.settings.liveness_timeout_s
    results = await asyncio.gather(*(_ask(link, path, timeout_s) for link in links))
    return [(link, body) for link, body in zip(links, results, strict=True) if body is not None]


async def _ask(link: WorkerLink, path: str, timeout_s: float) -> Any:
    try:
        body = await link.client.get_json(path, timeout_s=timeout_s)
    except WorkerNoAnswer:
        return link.known.get(path)
    except WorkerError:
        return None
    link.known[path] = body
    return body


def _union(lists: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for items in lists:
        for item in items if isinstance(items, list) else []:
            seen.setdefault(repr(item), item)
    return list(seen.values())
