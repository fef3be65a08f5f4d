"""`GET /templates/{file}`: the workflow templates of a ComfyUI that has its template package.

ComfyUI installs `comfyui-workflow-templates` with its requirements and serves the package's
`templates` folder as an aiohttp static resource on `/templates` (no `/api` alias). The
emulator stands in a small set of its own (`data/templates/`) that runs on its default
catalogue: the web frontend's default graph (Z-Image Turbo), SD1.5 and SDXL text to image,
each with its workflow (`{name}.json`) and thumbnail (`{name}-1.webp`, 160 px: a gradient
picture as the emulator's outputs, with the model's name), an `index.json`
in the package's format and an empty `index_logo.json`. The package's translated indexes
(`index.{locale}.json`) are answered with the one index, whose titles are English.

As aiohttp's static resource: a file is a FileResponse (ETag, ranges, ComfyUI's cache
headers), a missing one is a 404 with no body, a path leaving the folder a plain-text 404,
the folder itself a 403.
"""

from __future__ import annotations

import mimetypes
import posixpath
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.http.fileresponse import file_response
from workers.emulator.http.responses import OCTET_TYPE, forbidden, missing_file, not_found
from workers.emulator.http.routes.common import RouteTable
from workers.emulator.http.routes.webroot import cache_headers

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "data" / "templates"
INDEX = "index.json"
LOCALES = ("ar", "es", "fa", "fr", "ja", "ko", "pt-BR", "ru", "tr", "zh", "zh-TW")
"""The languages of the translated indexes the template package ships (0.11.97), which the
frontend asks for in those languages."""
TRANSLATED_INDEXES = frozenset(f"index.{locale}.json" for locale in LOCALES)
_ROOT = "/templates"


def template_name(path: str) -> str | None:
    """The file of the template folder that `path` (below `/templates/`) names, a translated
    index read as the index; "" for the folder itself, None for a path that leaves it."""
    target = posixpath.normpath(posixpath.join(_ROOT, path))
    if target == _ROOT:
        return ""
    if not target.startswith(_ROOT + "/") or "\x00" in target:
        return None
    name = target.removeprefix(_ROOT + "/")
    return INDEX if name in TRANSLATED_INDEXES else name


async def template_file(request: Request) -> Response:
    path: str = request.path_params["path"]
    name = template_name(path)
    if name is None:
        return not_found()
    target = TEMPLATES_DIR / name
    if target.is_dir():
        return forbidden()
    headers = cache_headers(path)
    if not target.is_file():
        return missing_file(headers)
    content_type = mimetypes.guess_type(target.name)[0] or OCTET_TYPE
    return file_response(str(target), request.headers, {**headers, "Content-Type": content_type})


ROUTES: RouteTable = [("GET", "/templates/{path:path}", template_file)]
