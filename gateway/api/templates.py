"""`GET /templates/{file}`: the workflow templates the web frontend browses
(`gateway.api.template_folders`).

From the template packages installed beside the gateway when there are any (as ComfyUI serves
its own); else from a worker, since a real ComfyUI worker serves the ones installed with it (and
an emulated worker a small built-in set).
An index that neither has (the template lists, the logo map) is answered as an empty one:
ComfyUI's 404 makes the frontend log an error on every start, an empty index shows an empty
template browser.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, JSONResponse

from gateway.api.deps import Ctx
from gateway.api.frontend import cache_headers
from gateway.api.proxy import open_upstream, streamed
from gateway.api.template_folders import empty_index

router = APIRouter()


@router.api_route("/templates/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
async def template_file(path: str, request: Request, ctx: Ctx) -> Response:
    if ctx.templates.folders:
        found = ctx.templates.file(path)
        if found is None:
            return Response(status_code=404)
        return FileResponse(found, headers=cache_headers(found.name))
    upstream, stack = await open_upstream(request, ctx)
    empty = empty_index(path)
    if upstream.status_code == 404 and empty is not None:
        await stack.aclose()
        return JSONResponse(empty)
    return streamed(upstream, stack)
