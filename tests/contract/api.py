"""Small functions over ComfyUI's HTTP API: submit a prompt, wait for its history or its start."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

import httpx

from tests.contract.graphs import Prompt

POLL_S = 0.05
_seeds = itertools.count(int(time.time()) % 1_000_000 * 1000)


def fresh_seed() -> int:
    """A seed no earlier prompt of this run used, so the sampler cannot be served from cache."""
    return next(_seeds)


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:10]}"


async def submit(http: httpx.AsyncClient, prompt: Prompt, **fields: Any) -> dict[str, Any]:
    """POST /prompt; the answer must be 200. Returns its body."""
    response = await http.post("/prompt", json={"prompt": prompt, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def wait_history(
    http: httpx.AsyncClient, prompt_id: str, timeout_s: float = 90.0
) -> dict[str, Any]:
    """The history entry of `prompt_id`, once the run has ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = await http.get(f"/history/{prompt_id}")
        assert response.status_code == 200
        body = response.json()
        if prompt_id in body:
            entry: dict[str, Any] = body[prompt_id]
            return entry
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"no history for {prompt_id} after {timeout_s}s")


async def wait_running(http: httpx.AsyncClient, prompt_id: str, timeout_s: float = 90.0) -> None:
    """Return once `prompt_id` is the running item of GET /queue."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queue = (await http.get("/queue")).json()
        if any(item[1] == prompt_id for item in queue["queue_running"]):
            return
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"{prompt_id} not running after {timeout_s}s")


async def run(http: httpx.AsyncClient, prompt: Prompt, **fields: Any) -> dict[str, Any]:
    """Submit `prompt` and return its history entry once it has run."""
    body = await submit(http, prompt, **fields)
    return await wait_history(http, body["prompt_id"])


def images(entry: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The `images` UI output of `node` in a history entry."""
    found: list[dict[str, Any]] = entry["outputs"][node]["images"]
    return found
