"""The node-output cache as a client sees it (PROTOCOL.md 2.3, 3.3): an identical prompt is
served from cache with its old file, a new seed re-runs only the sampler and what follows it."""

from __future__ import annotations

import httpx

from tests.contract import api, events, graphs
from tests.contract.graphs import ALL_NODES, DECODE, SAMPLER, SAVE, Prompt
from tests.contract.servers import Server
from tests.contract.sockets import Message, open_socket, types


async def run_watched(
    server: Server, http: httpx.AsyncClient, prompt: Prompt
) -> tuple[str, list[Message]]:
    """Run `prompt` with a client socket; returns its id and the socket's frames."""
    client_id = api.unique("cache")
    async with open_socket(server, client_id) as socket:
        await socket.recv(10)
        body = await api.submit(http, prompt, client_id=client_id)
        return body["prompt_id"], await socket.until_done(body["prompt_id"])


async def test_an_identical_prompt_is_fully_cached_and_reports_the_old_file(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    first_id, _ = await run_watched(server, http, prompt)
    first = await api.wait_history(http, first_id)
    again_id, received = await run_watched(server, http, prompt)
    [cached] = events.of_type(received, "execution_cached")
    assert cached["nodes"] == ALL_NODES
    assert events.executing_nodes(received) == []
    assert types(received) == [
        "status",
        "status",
        "execution_start",
        "execution_cached",
        "executed",
        "progress_state",
        "execution_success",
        "status",
        "executing",
    ]
    [executed] = events.of_type(received, "executed")
    old_images = api.images(first, SAVE)
    assert executed["output"]["images"] == old_images
    assert server.local_files(old_images) == [
        {"filename": f"{prefix}_00001_.png", "subfolder": "", "type": "output"}
    ]
    again = await api.wait_history(http, again_id)
    assert api.images(again, SAVE) == old_images
    assert again["status"]["status_str"] == "success"
    view = await http.get("/view", params={"filename": f"{prefix}_00002_.png"})
    assert view.status_code == 404


async def test_a_new_seed_reruns_only_the_sampler_and_its_descendants(
    server: Server, http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    await api.run(http, graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()))
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    prompt_id, received = await run_watched(server, http, prompt)
    [cached] = events.of_type(received, "execution_cached")
    assert cached["nodes"] == [node for node in ALL_NODES if node not in (SAMPLER, DECODE, SAVE)]
    assert events.executing_nodes(received) == [SAMPLER, DECODE, SAVE]
    entry = await api.wait_history(http, prompt_id)
    assert server.local_files(api.images(entry, SAVE)) == [
        {"filename": f"{prefix}_00002_.png", "subfolder": "", "type": "output"}
    ]
