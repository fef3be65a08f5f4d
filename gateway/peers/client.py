"""Requests from this node to another gateway node, through the URL it registered.

They carry the farm's token when one is set (every node of a farm shares it) and the header
`PEER_HEADER` naming this node, so the receiving node acts on its own workers only and never
passes the request on again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx
from starlette.requests import Request

log = logging.getLogger(__name__)

PEER_HEADER = "x-comfy-gateway-node"


def from_peer(request: Request) -> bool:
    """Whether another gateway node sent this request (then it is never passed on)."""
    return PEER_HEADER in request.headers


class PeerError(Exception):
    """The other node did not answer."""


class PeerClient:
    def __init__(
        self,
        node: str,
        token: str | None,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        headers = {PEER_HEADER: node}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def post_json(self, url: str, path: str, body: Mapping[str, object]) -> int:
        """POST `body` to the node at `url`; its status."""
        response = await self._request("POST", url + path, json=dict(body))
        return response.status_code

    async def post_form(
        self, url: str, path: str, body: bytes, content_type: str
    ) -> httpx.Response:
        headers = {"content-type": content_type}
        return await self._request("POST", url + path, content=body, headers=headers)

    def stream(
        self, url: str, path: str, params: Mapping[str, str], headers: Mapping[str, str]
    ) -> Any:
        """An async context manager of the streamed response (`httpx.AsyncClient.stream`)."""
        return self._http.stream("GET", url + path, params=dict(params), headers=dict(headers))

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise PeerError(f"{method} {url}: {exc!r}") from exc
