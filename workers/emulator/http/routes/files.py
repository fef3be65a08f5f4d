"""File routes: /view, /upload/image, /upload/mask, /view_metadata (PROTOCOL.md 1.4-1.5)."""

from __future__ import annotations

import os

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.files import served_content_type, view_target
from workers.emulator.http import images, uploads
from workers.emulator.http.fileresponse import file_response
from workers.emulator.http.responses import empty, json_response
from workers.emulator.http.routes.common import RouteTable, emulator_of, query

MAX_FORM_FILES = 1000


async def view(request: Request) -> Response:
    params = query(request)
    target = view_target(emulator_of(request).dirs, params)
    if isinstance(target, int):
        return empty(target)
    filename = os.path.basename(target)
    disposition = {"Content-Disposition": f'filename="{filename}"'}
    variant = images.view_variant(target, params)
    if variant is not None:
        body, media_type = variant
        return Response(body, media_type=media_type, headers=disposition)
    headers = {**disposition, "Content-Type": served_content_type(filename)}
    return file_response(target, request.headers, headers)


async def upload_image(request: Request) -> Response:
    dirs = emulator_of(request).dirs
    async with request.form(max_files=MAX_FORM_FILES) as form:
        outcome = uploads.upload(dirs, form)
    return empty(outcome) if isinstance(outcome, int) else json_response(outcome)


async def upload_mask(request: Request) -> Response:
    dirs = emulator_of(request).dirs
    async with request.form(max_files=MAX_FORM_FILES) as form:
        outcome = uploads.upload(dirs, form, uploads.mask_saver(dirs))
    return empty(outcome) if isinstance(outcome, int) else json_response(outcome)


async def view_metadata(request: Request) -> Response:
    """Emulated checkpoints have no file and no `__metadata__`: 404, as for such a file."""
    return empty(404)


ROUTES: RouteTable = [
    ("GET", "/view", view),
    ("POST", "/upload/image", upload_image),
    ("POST", "/upload/mask", upload_mask),
    ("GET", "/view_metadata/{folder_name}", view_metadata),
]
