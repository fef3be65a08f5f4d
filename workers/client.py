"""One ComfyUI instance over HTTP and WebSocket.

Transports are injectable: pass an `httpx.AsyncBaseTransport` (e.g. `httpx.MockTransport`)
for HTTP and a `ws_connect` callable for the event socket, and no network is touched.

Errors say what the caller may conclude: `WorkerUnreachable` means the request never reached
the instance (connection refused), so it certainly did not act on it; `WorkerNoAnswer` means
the outcome is unknown; `WorkerRejected` carries ComfyUI's own error answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake


class WorkerError(RuntimeError):
    """Something went wrong talking to one instance."""


class WorkerUnreachable(WorkerError):
    """The instance refused the connection: nothing was delivered."""


class WorkerNoAnswer(WorkerError):
    """Sent, but no usable answer (timeout, dropped connection): the outcome is unknown."""


class WorkerRejected(WorkerError):
    """The instance answered with an error status (e.g. 400 with ComfyUI's error body)."""

    def __init__(self, status: int, body: Any):
        super().__init__(f"instance answered {status}: {str(body)[:300]}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class QueueSnapshot:
    """Prompt ids an instance holds: the one running and those waiting."""

    running: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()

    def holds(self, prompt_id: str) -> bool:
        return prompt_id in self.running or prompt_id in self.pending


class WebSocketLike(Protocol):
    async def send(self, message: str) -> None: ...

    async def recv(self) -> str | bytes: ...

    async def close(self) -> None: ...


WsConnect = Callable[[str], AbstractAsyncContextManager[WebSocketLike]]
Frame = dict[str, Any] | bytes


def _default_ws_connect(url: str) -> AbstractAsyncContextManager[WebSocketLike]:
    from websockets.asyncio.client import connect

    # ComfyUI sends no pings and can be silent for minutes while a checkpoint loads.
    return connect(url, max_size=None, ping_interval=None, open_timeout=10, close_timeout=2)


class ComfyClient:
    """HTTP + WS client of one ComfyUI instance (or the emulator)."""

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        ws_connect: WsConnect | None = None,
        timeout_s: float = 30.0,
    ):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
        )
        self._ws_connect = ws_connect or _default_ws_connect

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- plain requests ----------------------------------------------------------------------

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise WorkerUnreachable(f"{self.base_url}{path}: {exc}") from exc
        except httpx.TransportError as exc:
            raise WorkerNoAnswer(f"{self.base_url}{path}: {exc!r}") from exc

    async def get_json(
        self, path: str, params: Mapping[str, Any] | None = None, *, timeout_s: float | None = None
    ) -> Any:
        """GET `path` as JSON; `timeout_s` bounds this request instead of the client's."""
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        response = await self._request("GET", path, params=params, **extra)
        return _json_or_raise(response)

    async def answers(self, timeout_s: float) -> bool:
        """Whether its HTTP server answers `GET /prompt` (cheap, and served by ComfyUI while
        it samples) within `timeout_s`. A stopped process is accepted connections by its
        kernel and reads none: that is a timeout, so False."""
        try:
            await self._request("GET", "/prompt", timeout=timeout_s)
        except WorkerError:
            return False
        return True

    async def _post(self, path: str, body: Any) -> httpx.Response:
        response = await self._request("POST", path, json=body)
        if response.status_code >= 400:
            raise WorkerRejected(response.status_code, _body(response))
        return response

    async def submit(
        self,
        prompt_id: str,
        prompt: Mapping[str, Any],
        *,
        client_id: str,
        extra_data: Mapping[str, Any] | None = None,
        partial_execution_targets: Sequence[str] | None = None,
        number: float | None = None,
    ) -> dict[str, Any]:
        """POST /prompt with our own prompt_id; returns ComfyUI's answer. `number` places it in
        the instance's queue (lowest runs first) without advancing the instance's counter."""
        body: dict[str, Any] = {
            "prompt": prompt,
            "prompt_id": prompt_id,
            "client_id": client_id,
            "extra_data": dict(extra_data or {}),
        }
        if number is not None:
            body["number"] = number
        if partial_execution_targets is not None:
            body["partial_execution_targets"] = list(partial_execution_targets)
        answer: dict[str, Any] = (await self._post("/prompt", body)).json()
        return answer

    async def queue(self) -> QueueSnapshot:
        body = await self.get_json("/queue")
        return QueueSnapshot(
            running=tuple(str(item[1]) for item in body.get("queue_running", [])),
            pending=tuple(str(item[1]) for item in body.get("queue_pending", [])),
        )

    async def history(self, prompt_id: str) -> dict[str, Any] | None:
        """The instance's history entry of one prompt, None when it has none."""
        body = await self.get_json(f"/history/{quote(prompt_id, safe='')}")
        entry = body.get(prompt_id) if isinstance(body, dict) else None
        return entry if isinstance(entry, dict) else None

    async def interrupt(self, prompt_id: str) -> None:
        """Interrupt this prompt only (never a bare, instance-wide interrupt)."""
        await self._post("/interrupt", {"prompt_id": prompt_id})

    async def delete(self, prompt_ids: Sequence[str]) -> None:
        await self._post("/queue", {"delete": list(prompt_ids)})

    async def free(self, *, unload_models: bool = False, free_memory: bool = False) -> None:
        await self._post("/free", {"unload_models": unload_models, "free_memory": free_memory})

    async def object_info(self) -> dict[str, Any]:
        body: dict[str, Any] = await self.get_json("/object_info")
        return body

    # -- files -------------------------------------------------------------------------------

    def view(
        self, params: Mapping[str, str], headers: Mapping[str, str] | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        """GET /view as a stream; the caller reads `aiter_bytes()` inside the block."""
        return self.stream("GET", "/view", params=params, headers=headers)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | str | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """Any request, its answer streamed: read `aiter_raw()` or `aiter_bytes()` inside the
        block. An error status is an answer here, not an exception."""
        request = self._http.build_request(
            method, path, params=params, headers=headers, content=content
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.ConnectError as exc:
            raise WorkerUnreachable(f"{self.base_url}{path}: {exc}") from exc
        except httpx.TransportError as exc:
            raise WorkerNoAnswer(f"{self.base_url}{path}: {exc!r}") from exc
        try:
            yield response
        finally:
            await response.aclose()

    async def upload(
        self, path: str, content: bytes | AsyncIterator[bytes], content_type: str
    ) -> httpx.Response:
        """Forward a multipart upload body unchanged (ComfyUI parses it)."""
        return await self._request(
            "POST", path, content=content, headers={"content-type": content_type}
        )

    # -- events ------------------------------------------------------------------------------

    def ws_url(self, client_id: str) -> str:
        scheme = "wss" if self.base_url.startswith("https") else "ws"
        host = self.base_url.split("://", 1)[1]
        return f"{scheme}://{host}/ws?clientId={quote(client_id, safe='')}"

    @asynccontextmanager
    async def events(
        self, client_id: str, feature_flags: Mapping[str, Any] | None = None
    ) -> AsyncIterator[AsyncIterator[Frame]]:
        """Open the event socket as `client_id`; yields an iterator of frames.

        Text frames arrive parsed (dict), binary frames as bytes. The socket is fully closed
        when the block exits, before any reconnect can reuse the same id.
        """
        url = self.ws_url(client_id)
        async with AsyncExitStack() as stack:
            try:
                socket = await stack.enter_async_context(self._ws_connect(url))
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                raise WorkerUnreachable(f"{url}: {exc!r}") from exc
            if feature_flags is not None:
                await socket.send(json.dumps({"type": "feature_flags", "data": feature_flags}))
            yield _frames(socket)


async def _frames(socket: WebSocketLike) -> AsyncIterator[Frame]:
    while True:
        try:
            message = await socket.recv()
        except ConnectionClosed:
            return
        if isinstance(message, bytes):
            yield message
        else:
            yield json.loads(message)


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _json_or_raise(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise WorkerRejected(response.status_code, _body(response))
    try:
        return response.json()
    except ValueError as exc:
        raise WorkerNoAnswer(f"{response.url}: not JSON") from exc
