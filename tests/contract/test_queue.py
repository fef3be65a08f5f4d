"""The queue: numbers and `front`, GET/POST /queue, while a long prompt holds the worker
(PROTOCOL.md 1.1 `number`, 1.2)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.contract import api, graphs
from tests.contract.graphs import SAVE
from tests.contract.servers import NO_TOKEN, Server


def quick(checkpoints: list[str], prefix: str) -> graphs.Prompt:
    return graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())


async def queue(http: httpx.AsyncClient) -> dict[str, list[list[Any]]]:
    body: dict[str, list[list[Any]]] = (await http.get("/queue")).json()
    return body


def by_id(items: list[list[Any]]) -> dict[str, list[Any]]:
    return {item[1]: item for item in items}


async def test_queue_shows_the_running_and_pending_items_as_five_arrays(
    slow_http: httpx.AsyncClient, blocker: str, checkpoints: list[str], prefix: str
) -> None:
    prompt = quick(checkpoints, prefix)
    body = await api.submit(slow_http, prompt, client_id="queue-client")
    listing = await queue(slow_http)
    [running] = listing["queue_running"]
    assert running[1] == blocker
    assert len(running) == 5
    assert running[4] == [SAVE]
    assert by_id(listing["queue_pending"]) == {
        body["prompt_id"]: [
            body["number"],
            body["prompt_id"],
            prompt,
            {"client_id": "queue-client"},
            [SAVE],
        ]
    }
    remaining = (await slow_http.get("/prompt")).json()["exec_info"]["queue_remaining"]
    assert remaining == 2


async def test_numbers_count_up_front_negates_and_an_explicit_number_is_kept(
    slow_server: Server,
    slow_http: httpx.AsyncClient,
    blocker: str,
    checkpoints: list[str],
    prefix: str,
) -> None:
    first = await api.submit(slow_http, quick(checkpoints, prefix))
    n = first["number"]
    assert isinstance(n, int)
    # A request without a prompt still takes a number; by design a gateway's counter is the
    # farm's and numbers accepted prompts only.
    assert (await slow_http.post("/prompt", json={})).status_code == 400
    taken = 1 if slow_server.gateway else 2
    front = await api.submit(slow_http, quick(checkpoints, prefix), front=True)
    explicit = await api.submit(slow_http, quick(checkpoints, prefix), number=7.5)
    last = await api.submit(slow_http, quick(checkpoints, prefix))
    assert front["number"] == -(n + taken)
    assert explicit["number"] == 7.5
    assert last["number"] == n + taken + 1
    pending = by_id((await queue(slow_http))["queue_pending"])
    assert {pid: item[0] for pid, item in pending.items()} == {
        body["prompt_id"]: body["number"] for body in (first, front, explicit, last)
    }


async def test_pending_prompts_run_lowest_number_first(
    slow_http: httpx.AsyncClient, blocker: str, checkpoints: list[str], prefix: str
) -> None:
    later = await api.submit(slow_http, quick(checkpoints, prefix))
    sooner = await api.submit(slow_http, quick(checkpoints, prefix), front=True)
    await slow_http.post("/interrupt", json={"prompt_id": blocker})
    await api.wait_history(slow_http, later["prompt_id"])
    order = list((await slow_http.get("/history", params={"max_items": 2})).json())
    assert order == [sooner["prompt_id"], later["prompt_id"]]


async def test_delete_removes_a_pending_prompt_which_then_never_runs(
    slow_http: httpx.AsyncClient, blocker: str, checkpoints: list[str], prefix: str
) -> None:
    deleted = await api.submit(slow_http, quick(checkpoints, prefix))
    kept = await api.submit(slow_http, quick(checkpoints, prefix))
    response = await slow_http.post("/queue", json={"delete": [deleted["prompt_id"]]})
    assert response.status_code == 200
    assert response.content == b""
    assert list(by_id((await queue(slow_http))["queue_pending"])) == [kept["prompt_id"]]
    await slow_http.post("/interrupt", json={"prompt_id": blocker})
    await api.wait_history(slow_http, kept["prompt_id"])
    assert (await slow_http.get(f"/history/{deleted['prompt_id']}")).json() == {}


async def test_delete_and_clear_leave_the_running_prompt_alone(
    slow_server: Server,
    slow_http: httpx.AsyncClient,
    blocker: str,
    checkpoints: list[str],
    prefix: str,
) -> None:
    for _ in range(2):
        await api.submit(slow_http, quick(checkpoints, prefix))
    await slow_http.post("/queue", json={"delete": [blocker]})
    if slow_server.gateway:
        # A gateway clears everyone's queue only for a client with its operator token.
        refused = await slow_http.post("/api/queue", json={"clear": True}, headers=NO_TOKEN)
        assert refused.status_code == 401
        assert len((await queue(slow_http))["queue_pending"]) == 2
    response = await slow_http.post(
        "/api/queue", json={"clear": True}, headers=slow_server.operator_headers
    )
    assert response.status_code == 200
    assert response.content == b""
    listing = await queue(slow_http)
    assert listing["queue_pending"] == []
    assert [item[1] for item in listing["queue_running"]] == [blocker]
    assert (await slow_http.get("/prompt")).json() == {"exec_info": {"queue_remaining": 1}}
