"""The ComfyUI client over httpx.MockTransport: what it sends, and what its errors mean."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from workers.client import (
    ComfyClient,
    QueueSnapshot,
    WorkerNoAnswer,
    WorkerRejected,
    WorkerUnreachable,
)

Handler = Callable[[httpx.Request], httpx.Response]


def client_for(handler: Handler) -> ComfyClient:
    return ComfyClient("http://worker:1234", transport=httpx.MockTransport(handler))


async def test_submit_sends_our_prompt_id_and_the_relay_client_id() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"prompt_id": "p1", "number": 0, "node_errors": {}})

    client = client_for(handler)
    answer = await client.submit("p1", {"9": {}}, client_id="relay", extra_data={"a": 1})
    await client.aclose()
    assert answer["prompt_id"] == "p1"
    assert seen == [
        {"prompt": {"9": {}}, "prompt_id": "p1", "client_id": "relay", "extra_data": {"a": 1}}
    ]


async def test_a_400_becomes_rejected_with_comfyuis_body() -> None:
    body = {"error": {"type": "prompt_no_outputs"}, "node_errors": {}}
    client = client_for(lambda request: httpx.Response(400, json=body))
    with pytest.raises(WorkerRejected) as caught:
        await client.submit("p1", {}, client_id="r")
    await client.aclose()
    assert caught.value.status == 400
    assert caught.value.body == body


async def test_refused_connection_means_unreachable_and_timeouts_mean_unknown() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    refused, hung = client_for(refuse), client_for(hang)
    with pytest.raises(WorkerUnreachable):
        await refused.queue()
    with pytest.raises(WorkerNoAnswer):
        await hung.queue()
    await refused.aclose()
    await hung.aclose()


async def test_queue_and_history_are_read_by_prompt_id() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/queue":
            return httpx.Response(
                200,
                json={
                    "queue_running": [[0, "a", {}, {}, []]],
                    "queue_pending": [[1, "b", {}, {}, []]],
                },
            )
        if request.url.path == "/history/a":
            return httpx.Response(200, json={"a": {"status": {"status_str": "success"}}})
        return httpx.Response(200, json={})

    client = client_for(handler)
    assert await client.queue() == QueueSnapshot(running=("a",), pending=("b",))
    assert await client.history("a") == {"status": {"status_str": "success"}}
    assert await client.history("zzz") is None
    await client.aclose()


async def test_interrupt_always_names_the_prompt() -> None:
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200)

    client = client_for(handler)
    await client.interrupt("p9")
    await client.aclose()
    assert json.loads(bodies[0]) == {"prompt_id": "p9"}


async def test_view_streams_the_body() -> None:
    client = client_for(
        lambda request: httpx.Response(
            200, content=b"x" * 100_000, headers={"content-type": "image/png"}
        )
    )
    async with client.view({"filename": "a.png"}) as response:
        data = b"".join([chunk async for chunk in response.aiter_bytes()])
    await client.aclose()
    assert len(data) == 100_000


def test_ws_url_carries_the_client_id() -> None:
    client = ComfyClient("http://127.0.0.1:9000/")
    assert client.ws_url("a b") == "ws://127.0.0.1:9000/ws?clientId=a%20b"
