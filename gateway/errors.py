"""The gateway's errors, and the HTTP answer each becomes at the edge.

ComfyUI routes answer in ComfyUI's error shape (`{"error": {type, message, details,
extra_info}, "node_errors": {}}`); gateway routes answer `{"error": message}`.
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """Base: `status` is the HTTP status; `retryable` tells a client whether to try again."""

    status = 500
    retryable = False

    def __init__(self, message: str, *, kind: str = "gateway_error", details: str = ""):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.details = details

    def comfy_body(self, node_errors: dict[str, Any] | None = None) -> dict[str, Any]:
        error = {
            "type": self.kind,
            "message": self.message,
            "details": self.details,
            "extra_info": {},
        }
        return {"error": error, "node_errors": node_errors or {}}


class BadRequest(GatewayError):
    status = 400


class PromptRefused(BadRequest):
    """Validation failed: carries ComfyUI's exact 400 body."""

    def __init__(self, body: dict[str, Any]):
        error = body.get("error") or {}
        super().__init__(str(error.get("message", "invalid prompt")), kind=str(error.get("type")))
        self.body = body

    def comfy_body(self, node_errors: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.body


class Forbidden(GatewayError):
    status = 403


class Unauthorized(GatewayError):
    status = 401


class NotFound(GatewayError):
    status = 404


class Conflict(GatewayError):
    status = 409


class Unprocessable(GatewayError):
    status = 422


class PayloadTooLarge(GatewayError):
    status = 413


class UriTooLong(GatewayError):
    status = 414


class Unavailable(GatewayError):
    """Redis or every worker is unreachable: the request may be retried."""

    status = 503
    retryable = True


GATEWAY_PATHS = ("/gateway", "/healthz", "/readyz")


def error_body(path: str, exc: GatewayError) -> dict[str, Any]:
    """The body of an error answer: `{"error": message}` on the gateway's own routes,
    ComfyUI's error shape everywhere else (a ComfyUI client parses it)."""
    if path.startswith(GATEWAY_PATHS):
        return {"error": exc.message}
    return exc.comfy_body()
