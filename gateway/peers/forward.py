"""Requests that another node answers: a file its workers hold, an upload every node keeps.

`/view` of an output or temp file names the worker that wrote it; when that worker belongs to
another live node, the file is streamed from that node. An upload lands in the receiving
node's shared input folder and is copied, under the name it got there, to every other live
node, so a prompt that loads it may run on any node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack

import httpx
from fastapi import Response
from fastapi.responses import StreamingResponse

from gateway.errors import Unavailable
from gateway.peers.client import PeerClient, PeerError
from gateway.peers.registry import NodeRecord

log = logging.getLogger(__name__)


async def view(
    peers: PeerClient,
    node: NodeRecord,
    params: Mapping[str, str],
    asked: Mapping[str, str],
    safe_headers: Sequence[str],
) -> Response:
    """The file as `node` serves it, streamed (its status and safe headers)."""
    stack = AsyncExitStack()
    try:
        upstream = await stack.enter_async_context(peers.stream(node.url, "/view", params, asked))
    except httpx.HTTPError as exc:
        await stack.aclose()
        raise Unavailable(
            f"gateway node {node.name} unavailable: {exc!r}", kind="node_unavailable"
        ) from None
    headers = {k: v for k, v in upstream.headers.items() if k.lower() in safe_headers}
    return StreamingResponse(
        _stream(upstream, stack), status_code=upstream.status_code, headers=headers
    )


async def _stream(upstream: httpx.Response, stack: AsyncExitStack) -> AsyncIterator[bytes]:
    async with stack:
        async for chunk in upstream.aiter_raw():
            yield chunk


async def copy_upload(
    peers: PeerClient, nodes: Sequence[NodeRecord], name: str, subfolder: str, data: bytes
) -> list[str]:
    """Store an input file that this node stored under `subfolder/name` on every node in
    `nodes` too, overwriting there under the same name; the names of those that failed."""
    request = httpx.Request(
        "POST",
        "http://node/upload/image",
        data={"overwrite": "true", "subfolder": subfolder, "type": "input"},
        files={"image": (name, data, "application/octet-stream")},
    )
    body, content_type = request.read(), request.headers["content-type"]
    results = await asyncio.gather(
        *(_post(peers, node, "/upload/image", body, content_type) for node in nodes)
    )
    failed = [node.name for node, ok in zip(nodes, results, strict=True) if not ok]
    for node_name in failed:
        log.warning("upload %s not copied to node %s", name, node_name)
    return failed


async def _post(
    peers: PeerClient, node: NodeRecord, path: str, body: bytes, content_type: str
) -> bool:
    try:
        response = await peers.post_form(node.url, path, body, content_type)
    except PeerError:
        return False
    return response.status_code == 200


async def post_each(
    peers: PeerClient, nodes: Sequence[NodeRecord], path: str, body: Mapping[str, object]
) -> None:
    """POST the JSON `body` to each node; one that fails is logged."""

    async def post(node: NodeRecord) -> None:
        try:
            status = await peers.post_json(node.url, path, body)
        except PeerError as exc:
            log.warning("node %s: %s", node.name, exc)
            return
        if status != 200:
            log.warning("node %s answered %s to %s", node.name, status, path)

    await asyncio.gather(*(post(node) for node in nodes))
