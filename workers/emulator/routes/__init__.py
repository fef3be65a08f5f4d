"""The HTTP and WebSocket routes: ComfyUI's (each also under `/api`) and the control routes."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route, WebSocketRoute

from workers.emulator.routes import control, files, info, queue
from workers.emulator.ws import websocket_endpoint

__all__ = ["all_routes"]


def _comfy_routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = [WebSocketRoute("/ws", websocket_endpoint)]
    for table in (queue.ROUTES, files.ROUTES, info.ROUTES):
        routes.extend(Route(path, endpoint, methods=[method]) for method, path, endpoint in table)
    return routes


def _api_alias(route: BaseRoute) -> BaseRoute:
    if isinstance(route, WebSocketRoute):
        return WebSocketRoute("/api" + route.path, route.endpoint)
    assert isinstance(route, Route)
    return Route("/api" + route.path, route.endpoint, methods=route.methods)


def all_routes() -> list[BaseRoute]:
    """ComfyUI's routes, their `/api` aliases (as `add_routes` registers them), the controls."""
    comfy = _comfy_routes()
    controls = [
        Route(path, endpoint, methods=[method]) for method, path, endpoint in control.ROUTES
    ]
    return [*(_api_alias(route) for route in comfy), *comfy, *controls]
