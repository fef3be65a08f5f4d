"""The HTTP and WebSocket routes: ComfyUI's (each also under `/api`), its `/internal`
sub-application, and the control routes."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route, WebSocketRoute

from workers.emulator.http.routes import (
    control,
    files,
    frontend,
    info,
    internal,
    queue,
    templates,
    webroot,
)
from workers.emulator.http.routes.common import RouteTable
from workers.emulator.http.ws import plain_http_endpoint, websocket_endpoint

__all__ = ["all_routes"]


def _table(table: RouteTable) -> list[BaseRoute]:
    return [Route(path, endpoint, methods=[method]) for method, path, endpoint in table]


def _comfy_routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = [
        WebSocketRoute("/ws", websocket_endpoint),
        Route("/ws", plain_http_endpoint, methods=["GET"]),
        Route("/", webroot.root, methods=["GET"]),
    ]
    for table in (queue.ROUTES, files.ROUTES, info.ROUTES, frontend.ROUTES):
        routes.extend(_table(table))
    return routes


def _api_alias(route: BaseRoute) -> BaseRoute:
    if isinstance(route, WebSocketRoute):
        return WebSocketRoute("/api" + route.path, route.endpoint)
    assert isinstance(route, Route)
    return Route("/api" + route.path, route.endpoint, methods=route.methods)


def all_routes() -> list[BaseRoute]:
    """ComfyUI's routes, their `/api` aliases (as `add_routes` registers them), `/internal`,
    the static templates (no alias, as ComfyUI adds its static resources), the controls."""
    comfy = _comfy_routes()
    unaliased = _table(internal.ROUTES) + _table(templates.ROUTES) + _table(control.ROUTES)
    return [*(_api_alias(route) for route in comfy), *comfy, *unaliased]
