"""ComfyUI's user routes, answered by the gateway from its one store (`gateway.api.user_store`):
`/users`, `/settings`, `/settings/{id}`, `/userdata`, `/v2/userdata`, `/userdata/{file}`
and `/userdata/{file}/move/{dest}`, with ComfyUI's statuses and plain-text refusals.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse

from gateway.api.compat import json_body
from gateway.api.deps import Ctx, read_body
from gateway.api.schemas import parse_json
from gateway.api.user_store import DEFAULT_USER, UserData

router = APIRouter()

SMALL_BODY = 1024 * 1024


@router.get("/users")
async def get_users(ctx: Ctx) -> Response:
    return JSONResponse({"storage": "server", "migrated": ctx.users.migrated})


@router.post("/users")
async def post_users(request: Request) -> Response:
    """One user only (ComfyUI without `--multi-user`): its name is taken."""
    data = await json_body(request)
    if not isinstance(data, dict) or "username" not in data:
        return PlainTextResponse("username not provided", status_code=400)
    if data["username"] == DEFAULT_USER:
        return JSONResponse({"error": "Duplicate username."}, status_code=400)
    return JSONResponse({"error": "this gateway has one user, default"}, status_code=400)


@router.get("/settings")
async def get_settings(ctx: Ctx) -> Response:
    return JSONResponse(ctx.users.settings())


@router.get("/settings/{setting_id}")
async def get_setting(setting_id: str, ctx: Ctx) -> Response:
    return JSONResponse(ctx.users.settings().get(setting_id))


@router.post("/settings")
async def post_settings(request: Request, ctx: Ctx) -> Response:
    changes = await json_body(request)
    if not isinstance(changes, dict):
        return PlainTextResponse("settings must be a JSON object", status_code=400)
    ctx.users.update_settings(changes)
    return Response(status_code=200)


@router.post("/settings/{setting_id}")
async def post_setting(setting_id: str, request: Request, ctx: Ctx) -> Response:
    value = parse_json(await read_body(request, SMALL_BODY))
    ctx.users.update_settings({setting_id: value})
    return Response(status_code=200)


@router.get("/userdata")
async def list_userdata(request: Request, ctx: Ctx) -> Response:
    query = request.query_params
    directory = query.get("dir", "")
    if not directory:
        return PlainTextResponse("Directory not provided", status_code=400)
    path = ctx.users.path(directory)
    if path is None:
        return PlainTextResponse("Invalid directory", status_code=403)
    if not path.exists():
        return PlainTextResponse("Directory not found", status_code=404)
    listed = ctx.users.listing(
        path,
        recurse=_flag(query.get("recurse")),
        full_info=_flag(query.get("full_info")),
        split=_flag(query.get("split")),
    )
    return JSONResponse(listed)


@router.get("/v2/userdata")
async def list_userdata_v2(request: Request, ctx: Ctx) -> Response:
    asked = unquote(request.query_params.get("path", ""))
    users = ctx.users
    path = users.path(asked or None, create_parent=False)
    if path is None:
        return PlainTextResponse("Invalid path requested", status_code=400)
    if not path.exists():
        if path == users.user_dir:
            return JSONResponse([])  # a new user: no folder yet
        return PlainTextResponse("Requested path not found", status_code=404)
    if not path.is_dir():
        return PlainTextResponse("Requested path is not a directory", status_code=400)
    return JSONResponse(users.tree(path))


@router.api_route(
    "/userdata/{rest:path}", methods=["GET", "POST", "DELETE"], include_in_schema=False
)
async def userdata_file(request: Request, ctx: Ctx) -> Response:
    names = _names(request)
    if names is None:
        return Response(status_code=404)  # no ComfyUI route has this shape
    if len(names) == 2:
        return await _move(request, ctx.users, *names)
    if request.method == "GET":
        return _read(ctx.users, names[0])
    if request.method == "DELETE":
        return _delete(ctx.users, names[0])
    return await _write(request, ctx, names[0])


def _names(request: Request) -> tuple[str] | tuple[str, str] | None:
    """The file (and a move's destination) as named in the raw path: `%2F` stays inside one
    name, as aiohttp matches `{file}`."""
    raw = request.scope.get("raw_path", b"").decode("latin-1")
    _, _, tail = raw.partition("/userdata/")
    parts = [unquote(part) for part in tail.split("/")]
    if len(parts) == 1:
        return (parts[0],)
    if len(parts) == 3 and parts[1] == "move":
        return parts[0], parts[2]
    return None


def _read(users: UserData, name: str) -> Response:
    checked = _existing(users, name)
    if isinstance(checked, Response):
        return checked
    return FileResponse(checked) if checked.is_file() else Response(status_code=404)


def _delete(users: UserData, name: str) -> Response:
    checked = _existing(users, name)
    if isinstance(checked, Response):
        return checked
    checked.unlink()
    return Response(status_code=204)


def _existing(users: UserData, name: str) -> Path | Response:
    """The path of an existing file, or ComfyUI's refusal (400, 403, 404)."""
    if not name:
        return Response(status_code=400)
    path = users.path(name)
    if path is None:
        return Response(status_code=403)
    if not path.exists():
        return Response(status_code=404)
    return path


async def _write(request: Request, ctx: Ctx, name: str) -> Response:
    if not name:
        return Response(status_code=400)
    path = ctx.users.path(name)
    if path is None:
        return Response(status_code=403)
    if not _overwrite(request) and path.exists():
        return PlainTextResponse("File already exists", status_code=409)
    body = await read_body(request, ctx.settings.max_body_bytes, "max_body_mib")
    try:
        ctx.users.write(path, body)
    except OSError:
        return PlainTextResponse("Invalid filename", status_code=400)
    return _saved(request, ctx.users, path)


async def _move(request: Request, users: UserData, name: str, dest_name: str) -> Response:
    if request.method != "POST":
        return Response(status_code=405)
    source = _existing(users, name)
    if isinstance(source, Response):
        return source
    dest = users.path(dest_name) if dest_name else None
    if dest is None:
        return Response(status_code=400 if not dest_name else 403)
    if not _overwrite(request) and dest.exists():
        return PlainTextResponse("File already exists", status_code=409)
    users.move(source, dest)
    return _saved(request, users, dest)


def _saved(request: Request, users: UserData, path: Path) -> Response:
    if _flag(request.query_params.get("full_info")):
        return JSONResponse(users.file_info(path, users.user_dir))
    return Response(json.dumps(users.relative(path)), media_type="application/json")


def _overwrite(request: Request) -> bool:
    return request.query_params.get("overwrite", "true") != "false"


def _flag(value: str | None) -> bool:
    return (value or "").lower() == "true"
