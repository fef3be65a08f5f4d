"""POST /interrupt of a running prompt, and with the id of a prompt that is not running
(PROTOCOL.md 1.7, 2.3)."""

from __future__ import annotations

import httpx

from tests.contract import api, events
from tests.contract.graphs import SAMPLER
from tests.contract.servers import Server
from tests.contract.sockets import Message, Socket, open_socket, types


def is_progress(message: Message) -> bool:
    return bool(message["type"] == "progress")


async def next_step(socket: Socket) -> int:
    """Wait for the sampler's next step; returns its number."""
    messages = await socket.until(is_progress)
    value: int = messages[-1]["data"]["value"]
    return value


async def test_interrupt_stops_the_running_prompt_and_records_an_error(
    slow_server: Server, slow_http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    client_id = api.unique("interrupt")
    async with open_socket(slow_server, client_id) as socket:
        await socket.recv(10)
        prompt = slow_server.long_prompt(checkpoints[0], prefix, seed=api.fresh_seed())
        body = await api.submit(slow_http, prompt, client_id=client_id)
        prompt_id = body["prompt_id"]
        await next_step(socket)
        response = await slow_http.post("/interrupt", json={"prompt_id": prompt_id})
        assert response.status_code == 200
        assert response.content == b""
        tail = await socket.until_done(prompt_id, timeout_s=30)
    ending = [m for m in tail if m["type"] not in ("progress", "progress_state")]
    assert types(ending) == ["execution_interrupted", "status", "executing"]
    [interrupted] = events.of_type(tail, "execution_interrupted")
    assert set(interrupted) == {"prompt_id", "node_id", "node_type", "executed", "timestamp"}
    assert (interrupted["prompt_id"], interrupted["node_id"]) == (prompt_id, SAMPLER)
    assert interrupted["node_type"] == "KSampler"
    assert SAMPLER not in interrupted["executed"]
    entry = await api.wait_history(slow_http, prompt_id)
    assert (entry["status"]["status_str"], entry["status"]["completed"]) == ("error", False)
    assert entry["status"]["messages"][-1][0] == "execution_interrupted"
    assert entry["outputs"] == {}


async def test_interrupt_naming_another_prompt_leaves_the_running_one_going(
    slow_server: Server, slow_http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    client_id = api.unique("not-running")
    async with open_socket(slow_server, client_id) as socket:
        await socket.recv(10)
        prompt = slow_server.long_prompt(checkpoints[0], prefix, seed=api.fresh_seed())
        prompt_id = (await api.submit(slow_http, prompt, client_id=client_id))["prompt_id"]
        try:
            step = await next_step(socket)
            response = await slow_http.post("/interrupt", json={"prompt_id": api.unique("idle")})
            assert response.status_code == 200
            later = [await next_step(socket) for _ in range(3)]
            assert later[-1] > step
            queue = (await slow_http.get("/queue")).json()
            assert [item[1] for item in queue["queue_running"]] == [prompt_id]
        finally:
            await slow_http.post("/interrupt", json={"prompt_id": prompt_id})
            await socket.until_done(prompt_id, timeout_s=30)


async def test_interrupt_without_prompt_id_stops_the_running_prompt(
    slow_server: Server, slow_http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    client_id = api.unique("bare")
    async with open_socket(slow_server, client_id) as socket:
        await socket.recv(10)
        prompt = slow_server.long_prompt(checkpoints[0], prefix, seed=api.fresh_seed())
        prompt_id = (await api.submit(slow_http, prompt, client_id=client_id))["prompt_id"]
        step = await next_step(socket)
        if slow_server.gateway:
            # By design a gateway never stops everything: a bare interrupt stops only the
            # prompts of the client it names (body `client_id` or `?clientId=`), here none.
            assert (await slow_http.post("/interrupt", json={})).status_code == 200
            assert (await next_step(socket)) > step
        # ComfyUI ignores `client_id` here and stops whatever runs.
        response = await slow_http.post("/interrupt", json={"client_id": client_id})
        assert (response.status_code, response.content) == (200, b"")
        tail = await socket.until_done(prompt_id, timeout_s=30)
    assert events.of_type(tail, "execution_interrupted")[0]["prompt_id"] == prompt_id
