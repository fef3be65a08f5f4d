"""The web frontend's files: `GET /` and the static files under it, from the gateway's web root.

A path that is no file of the web root goes on to a worker (custom nodes' scripts under
`/extensions/NAME/`, their routes), as ComfyUI's static root comes after every other route.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, HTMLResponse

from gateway.api.browsers import COOKIE as BROWSER_COOKIE
from gateway.api.browsers import new_browser_id, valid_browser_id
from gateway.api.deps import Ctx
from gateway.api.webroot import WebRoot

router = APIRouter()

NO_CACHE = {"Cache-Control": "no-store, must-revalidate", "Pragma": "no-cache", "Expires": "0"}
NO_FRONTEND = """<!doctype html>
<html><head><meta charset="utf-8"><title>comfy-gateway</title></head>
<body>
<h1>comfy-gateway: no web frontend</h1>
<p>The ComfyUI API is served here (<code>POST /prompt</code>, <code>/ws</code>,
<code>/history</code>, <code>/view</code>, ...) but no web frontend is installed.</p>
<p>Install it with <code>pip install comfyui-frontend-package</code>, or start the gateway with
<code>--front-end-root DIR</code> (a folder with the frontend's <code>index.html</code>).</p>
</body></html>
"""


@router.get("/", include_in_schema=False)
async def root(request: Request, ctx: Ctx) -> Response:
    """The editor's page; a browser without one gets its id cookie (`gateway.api.browsers`)."""
    if ctx.web_root is None:
        return HTMLResponse(NO_FRONTEND, status_code=404)
    page = FileResponse(ctx.web_root.index, headers=NO_CACHE)
    if valid_browser_id(request.cookies.get(BROWSER_COOKIE)) is None:
        page.set_cookie(
            BROWSER_COOKIE,
            new_browser_id(),
            max_age=int(ctx.settings.job_ttl_s),
            httponly=True,
            samesite="strict",
        )
    return page


def static_file(web_root: WebRoot | None, request: Request) -> Response | None:
    """The web root's file for a GET or HEAD of this path, or None when it has none."""
    if web_root is None or request.method not in ("GET", "HEAD"):
        return None
    path = web_root.file(request.url.path)
    if path is None:
        return None
    return FileResponse(path, headers=cache_headers(path.name))


def cache_headers(name: str) -> dict[str, str]:
    # As ComfyUI's cache middleware: scripts and styles revalidate, images keep a day.
    if name.endswith((".js", ".css")):
        return {"Cache-Control": "no-cache"}
    if name.lower().endswith((".png", ".jpg", ".jpeg", ".webp", ".svg", ".woff2", ".ttf")):
        return {"Cache-Control": "public, max-age=86400"}
    return {}
