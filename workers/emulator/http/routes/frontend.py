"""The frontend's support routes, as ComfyUI 0.3.64 answers them with no custom nodes, a fresh
user directory and no --multi-user.

- `GET /users`: `{"storage": "server", "migrated": <the user's folder exists>}`.
- `GET /settings`: `{}`; `GET /settings/{id}`: `null` (both make the user's folder).
- `GET /userdata?dir=`: ComfyUI's plain-text refusals (400, 403, 404 "Directory not found");
  the user's folder itself, once made, lists `[]`.
- `GET /i18n`, `GET /workflow_templates`: `{}` (no custom node has locales or examples).
- `GET /experiment/models`: the model folders with their paths; `/experiment/models/{folder}`
  lists no file (the emulator has none), 404 for a folder ComfyUI does not know.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from workers.comfy.modelfolders import folder_paths, model_folders
from workers.emulator.http.responses import empty, json_response, text
from workers.emulator.http.routes.common import RouteTable, emulator_of, query

USERDATA_REFUSALS = {
    400: "Directory not provided",
    403: "Invalid directory",
    404: "Directory not found",
}


async def users(request: Request) -> Response:
    migrated = emulator_of(request).users.migrated
    return json_response({"storage": "server", "migrated": migrated})


async def settings(request: Request) -> Response:
    emulator_of(request).users.read_settings()
    return json_response({})


async def setting(request: Request) -> Response:
    emulator_of(request).users.read_settings()
    return json_response(None)


async def userdata(request: Request) -> Response:
    status = emulator_of(request).users.list_status(query(request).get("dir", ""))
    if status == 200:
        return json_response([])
    return text(USERDATA_REFUSALS[status], status)


async def i18n(request: Request) -> Response:
    return json_response({})


async def workflow_templates(request: Request) -> Response:
    return json_response({})


async def experiment_models(request: Request) -> Response:
    emulator = emulator_of(request)
    return json_response(model_folders(emulator.config.base_path, emulator.dirs.output))


async def experiment_models_in(request: Request) -> Response:
    emulator = emulator_of(request)
    known = folder_paths(emulator.config.base_path, emulator.dirs.output)
    return json_response([]) if request.path_params["folder"] in known else empty(404)


ROUTES: RouteTable = [
    ("GET", "/users", users),
    ("GET", "/settings", settings),
    ("GET", "/settings/{id}", setting),
    ("GET", "/userdata", userdata),
    ("GET", "/i18n", i18n),
    ("GET", "/workflow_templates", workflow_templates),
    ("GET", "/experiment/models", experiment_models),
    ("GET", "/experiment/models/{folder}", experiment_models_in),
]
