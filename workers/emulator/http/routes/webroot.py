"""The web root and everything no route takes, as aiohttp's router and ComfyUI's static root.

ComfyUI registers its frontend directory as a static resource on `/`, after every API route;
the emulator's is empty, as a ComfyUI started with an empty `--front-end-root`:

- `GET /` (and `/api/`) serves the missing index.html: 404, no body, octet-stream type, and
  the no-cache headers ComfyUI's handler sets.
- Any other GET or HEAD that no route takes falls to the static resource: a path inside the
  root is a missing file (404, empty, octet-stream), with the Cache-Control ComfyUI's cache
  middleware adds by extension as for a 200 (the file is found missing only after it ran);
  a path leaving the root (`//x`, `/../x`) is aiohttp's plain-text 404, the root itself 403.
- Other methods: 405 listing every method a route takes for the path, plus the static
  resource's GET and HEAD.
- `/internal` and below belong to a sub-application, without the static fallback.
"""

from __future__ import annotations

import posixpath

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from workers.emulator.http.responses import forbidden, method_not_allowed, missing_file, not_found

INTERNAL_PREFIX = "/internal"
STATIC_METHODS = frozenset({"GET", "HEAD"})
NO_CACHE = {"Cache-Control": "no-cache", "Pragma": "no-cache", "Expires": "0"}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
ONE_DAY_S = 86400
_ROOT = "/web-root"


async def root(request: Request) -> Response:
    """`GET /`: the FileResponse of an index.html the empty web root lacks."""
    return missing_file(NO_CACHE)


def cache_headers(path: str) -> dict[str, str]:
    """ComfyUI's cache middleware for a response it sees as a 200."""
    name = path.rsplit("/", 1)[-1]
    if path.endswith((".js", ".css")) or (name.startswith("index") and name.endswith(".json")):
        return {"Cache-Control": "no-cache"}
    if path.lower().endswith(IMAGE_SUFFIXES):
        return {"Cache-Control": f"public, max-age={ONE_DAY_S}"}
    return {}


def static(path: str) -> Response:
    """The static resource's answer for `path` in an empty directory."""
    target = posixpath.normpath(posixpath.join(_ROOT, path[1:]))
    if target == _ROOT:
        return forbidden()
    if not target.startswith(_ROOT + "/"):
        return not_found()
    return missing_file(cache_headers(path))


def allowed_methods(request: Request) -> set[str]:
    """Every method some route takes for this request's path."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods is not None:
            match, _ = route.matches(request.scope)
            if match is not Match.NONE:
                methods |= route.methods
    return methods


async def unmatched(request: Request, exc: Exception) -> Response:
    """The answer when no route takes the request (Starlette's 404 and 405)."""
    path: str = request.scope["path"]
    allowed = allowed_methods(request)
    if path == INTERNAL_PREFIX or path.startswith(INTERNAL_PREFIX + "/"):
        return method_not_allowed(allowed) if allowed else not_found()
    if request.method in STATIC_METHODS:
        return static(path)
    return method_not_allowed(allowed | STATIC_METHODS)
