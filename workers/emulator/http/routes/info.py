"""Listing routes: /object_info, /system_stats, /features, /models, /embeddings, /extensions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.catalog import recorded
from workers.emulator.http import systeminfo
from workers.emulator.http.responses import JSON_TYPE, empty, json_response
from workers.emulator.http.routes.common import RouteTable, emulator_of


async def object_info(request: Request) -> Response:
    body = emulator_of(request).catalog.object_info_json()
    return Response(body, media_type=JSON_TYPE)


async def object_info_class(request: Request) -> Response:
    class_type = request.path_params["node_class"]
    return json_response(emulator_of(request).catalog.class_info(class_type))


async def system_stats(request: Request) -> Response:
    emulator = emulator_of(request)
    config = emulator.config
    used_mib = emulator.engine.vram_used_mib()
    device = systeminfo.device_entry(config.profile, config.flags.cpu, used_mib)
    stats = systeminfo.system_stats(recorded("system_stats.json")["system"], config.argv, device)
    return json_response(stats)


async def features(request: Request) -> Response:
    return json_response(emulator_of(request).config.server_features)


async def models(request: Request) -> Response:
    return json_response(recorded("models.json"))


async def models_in_folder(request: Request) -> Response:
    folder = request.path_params["folder"]
    if folder not in recorded("models.json"):
        return empty(404)
    if folder == "configs":  # the yaml files ComfyUI ships in models/configs
        return json_response(recorded("model_configs.json"))
    return json_response(list(emulator_of(request).catalog.files(folder)))


async def embeddings(request: Request) -> Response:
    return json_response(recorded("embeddings.json"))


async def extensions(request: Request) -> Response:
    return json_response(recorded("extensions.json"))


ROUTES: RouteTable = [
    ("GET", "/object_info", object_info),
    ("GET", "/object_info/{node_class}", object_info_class),
    ("GET", "/system_stats", system_stats),
    ("GET", "/features", features),
    ("GET", "/models", models),
    ("GET", "/models/{folder}", models_in_folder),
    ("GET", "/embeddings", embeddings),
    ("GET", "/extensions", extensions),
]
