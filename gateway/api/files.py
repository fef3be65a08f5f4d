"""Files: /view streamed from the worker that wrote the file, uploads into the shared inputs.

Output and temp files are reported with the worker's name as the first part of `subfolder`
(see gateway.jobs.history); /view takes it off and asks that worker. Input files live in the one
input folder every worker shares, so any worker can serve them and an upload through any
worker is seen by all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack
from typing import Any

import httpx
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Message

from gateway.api.deps import Context, Ctx, read_body
from gateway.dispatch.links import WorkerLink
from gateway.errors import BadRequest, Conflict, Forbidden, NotFound, Unavailable
from gateway.jobs.history import NAMESPACED_TYPES, namespace_output, split_namespace
from gateway.peers import forward
from gateway.peers.client import PeerError, from_peer
from gateway.peers.registry import NodeRecord
from workers.client import WorkerError

router = APIRouter()

SAFE_HEADERS = (
    "content-type",
    "content-length",
    "content-encoding",
    "content-disposition",
    "content-range",
    "accept-ranges",
    "etag",
    "last-modified",
    "cache-control",
)
# What a client may ask of /view beyond the file: validators and byte ranges.
CONDITIONAL_HEADERS = (
    "range",
    "if-range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
)
FILE_TYPES = ("output", "input", "temp")


def _checked_view_params(query: dict[str, str]) -> tuple[str, str, str]:
    """(filename, type, subfolder) after ComfyUI's own checks, in ComfyUI's order."""
    filename = query.get("filename")
    if filename is None:
        raise NotFound("filename is required", kind="not_found")
    kind = query.get("type", "output")
    for suffix in FILE_TYPES:
        if filename.endswith(f" [{suffix}]"):
            filename, kind = filename[: -len(suffix) - 3], suffix
    if kind not in FILE_TYPES:
        raise BadRequest(f"unknown type {kind!r}", kind="invalid_request")
    if not filename or filename.startswith("/") or ".." in filename:
        raise BadRequest("invalid filename", kind="invalid_request")
    subfolder = query.get("subfolder", "")
    parts = subfolder.replace("\\", "/").split("/")
    if subfolder.startswith("/") or any(part in ("..", ".") for part in parts):
        raise Forbidden("subfolder leaves the folder", kind="forbidden")
    return filename, kind, subfolder


async def _route(ctx: Context, filename: str, kind: str, subfolder: str) -> tuple[WorkerLink, str]:
    """The worker that holds the file, and the subfolder to ask it for."""
    if kind not in NAMESPACED_TYPES:
        link = ctx.farm.any_ready()
        if link is None:
            raise Unavailable("no worker is ready", kind="not_ready")
        return link, subfolder
    worker, rest = split_namespace(subfolder)
    link = ctx.farm.link(worker)
    if link is not None:
        return link, rest
    # No worker named: a client that built the address itself. Find the one worker with it.
    return await _search(
        ctx, {"filename": filename, "type": kind, "subfolder": subfolder}
    ), subfolder


async def _search(ctx: Context, params: Mapping[str, str]) -> WorkerLink:
    links = ctx.farm.links.ready()
    found = await asyncio.gather(*(_holds(link, params) for link in links))
    holders = [link for link, holds in zip(links, found, strict=True) if holds]
    if not holders:
        raise NotFound(
            f"no worker holds {params['type']} file {params['filename']}", kind="not_found"
        )
    if len(holders) > 1:
        names = ", ".join(link.name for link in holders)
        raise Conflict(
            f"{params['filename']} exists on several workers ({names}); name one as the first "
            "part of subfolder, as history and the executed event do",
            kind="ambiguous_file",
        )
    return holders[0]


async def _holds(link: WorkerLink, params: Mapping[str, str]) -> bool:
    try:
        async with link.client.view(params) as response:
            return response.status_code == 200
    except WorkerError:
        return False


@router.get("/view")
async def view(request: Request, ctx: Ctx) -> Response:
    asked = {k: v for k, v in request.headers.items() if k.lower() in CONDITIONAL_HEADERS}
    try:
        filename, kind, subfolder = _checked_view_params(dict(request.query_params))
        node = _node_holding(ctx, kind, subfolder)
        if node is not None:
            params = dict(request.query_params)
            return await forward.view(ctx.peers, node, params, asked, SAFE_HEADERS)
        link, upstream_subfolder = await _route(ctx, filename, kind, subfolder)
        if ctx.file_roots.escapes(kind, link.name, upstream_subfolder, filename):
            raise Forbidden("the file's real path leaves its folder", kind="forbidden")
    except (BadRequest, Forbidden, NotFound) as exc:
        return Response(status_code=exc.status)  # ComfyUI refuses with a bare status
    params = {
        **request.query_params,
        "filename": filename,
        "type": kind,
        "subfolder": upstream_subfolder,
    }
    stack = AsyncExitStack()
    try:
        upstream = await stack.enter_async_context(link.client.view(params, asked))
    except WorkerError as exc:
        await stack.aclose()
        raise Unavailable(
            f"worker {link.name} unavailable: {exc}", kind="worker_unavailable"
        ) from None
    headers = {k: v for k, v in upstream.headers.items() if k.lower() in SAFE_HEADERS}
    return StreamingResponse(
        _stream(upstream, stack), status_code=upstream.status_code, headers=headers
    )


def _node_holding(ctx: Context, kind: str, subfolder: str) -> NodeRecord | None:
    """The other live node whose worker wrote the file (named first in `subfolder`)."""
    if kind not in NAMESPACED_TYPES:
        return None
    worker, _ = split_namespace(subfolder)
    return None if ctx.farm.link(worker) is not None else ctx.membership.node_of(worker)


async def _stream(upstream: httpx.Response, stack: AsyncExitStack) -> AsyncIterator[bytes]:
    async with stack:
        async for chunk in upstream.aiter_raw():
            yield chunk


@router.post("/upload/image")
async def upload_image(request: Request, ctx: Ctx) -> Response:
    link = _upload_target(ctx)
    body = await read_body(request, ctx.settings.max_body_bytes)
    response = await _forward_upload(
        ctx, link, "/upload/image", body, request.headers.get("content-type", "")
    )
    await _copy_to_peers(request, ctx, response)
    return response


@router.post("/upload/mask")
async def upload_mask(request: Request, ctx: Ctx) -> Response:
    """The original image may be another worker's output: send the upload to that worker."""
    body = await read_body(request, ctx.settings.max_body_bytes)
    content_type = request.headers.get("content-type", "")
    link = _upload_target(ctx)
    async with _form(request, body) as form:
        ref = _original_ref(form.get("original_ref"))
        kind = str(ref.get("type", "output"))
        node = _node_holding(ctx, kind, str(ref.get("subfolder", "")))
        if node is not None:  # that node composes the mask and stores it
            return await _upload_on(ctx, node, "/upload/mask", body, content_type)
        if kind in NAMESPACED_TYPES:
            filename, subfolder = str(ref["filename"]), str(ref.get("subfolder", ""))
            link, rest = await _route(ctx, filename, kind, subfolder)
            body, content_type = await _rebuilt(form, {**ref, "subfolder": rest})
    response = await _forward_upload(ctx, link, "/upload/mask", body, content_type)
    await _copy_to_peers(request, ctx, response)
    return response


async def _upload_on(
    ctx: Context, node: NodeRecord, path: str, body: bytes, content_type: str
) -> Response:
    try:
        upstream = await ctx.peers.post_form(node.url, path, body, content_type)
    except PeerError as exc:
        raise Unavailable(
            f"gateway node {node.name} unavailable: {exc}", kind="node_unavailable"
        ) from None
    return Response(
        upstream.content,
        status_code=upstream.status_code,
        media_type=upstream.headers.get("content-type"),
    )


async def _copy_to_peers(request: Request, ctx: Context, response: Response) -> None:
    """An input file stored here is stored on every other live node too (one that came
    from another node is that node's copy: not passed on)."""
    input_dir = ctx.file_roots.input_dir
    peers = list(ctx.membership.peers.values())
    if response.status_code != 200 or from_peer(request) or not peers:
        return
    try:
        answer = json.loads(bytes(response.body))
    except ValueError:
        return
    if input_dir is None or not isinstance(answer, dict) or answer.get("type") != "input":
        return
    name, subfolder = str(answer.get("name", "")), str(answer.get("subfolder", ""))
    path = input_dir / subfolder / name
    if not name or not path.resolve().is_relative_to(input_dir.resolve()):
        return
    data = await asyncio.to_thread(path.read_bytes)
    await forward.copy_upload(ctx.peers, peers, name, subfolder, data)


def _form(request: Request, body: bytes) -> Any:
    """The multipart form of a body already read (the request's own stream is spent)."""

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(request.scope, receive).form()


def _upload_target(ctx: Context) -> WorkerLink:
    link = ctx.farm.any_ready()
    if link is None:
        raise Unavailable("no worker is ready to store the upload", kind="not_ready")
    return link


def _original_ref(value: Any) -> dict[str, Any]:
    if not isinstance(value, str):
        raise BadRequest("original_ref is required", kind="invalid_request")
    try:
        ref = json.loads(value)
    except ValueError:
        raise BadRequest("original_ref must be JSON", kind="invalid_request") from None
    if not isinstance(ref, dict) or "filename" not in ref:
        raise BadRequest("original_ref needs a filename", kind="invalid_request")
    return ref


async def _rebuilt(form: Any, ref: dict[str, Any]) -> tuple[bytes, str]:
    """The multipart body again, with `original_ref` pointing into the worker's own folder."""
    files: dict[str, Any] = {}
    data: dict[str, str] = {}
    for key, value in form.multi_items():
        if hasattr(value, "read"):
            files[key] = (value.filename, await value.read(), value.content_type)
        else:
            data[key] = value
    data["original_ref"] = json.dumps(ref)
    request = httpx.Request("POST", "http://worker/upload/mask", data=data, files=files)
    return request.read(), request.headers["content-type"]


async def _forward_upload(
    ctx: Context, link: WorkerLink, path: str, body: bytes, content_type: str
) -> Response:
    """The worker's answer; after a stored upload its file lists are read again, so that
    `object_info` (LoadImage's list) shows the new file before the client hears back."""
    try:
        upstream = await link.client.upload(path, body, content_type)
    except WorkerError as exc:
        raise Unavailable(
            f"worker {link.name} unavailable: {exc}", kind="worker_unavailable"
        ) from None
    try:
        answer = upstream.json()
    except ValueError:
        return Response(upstream.content, status_code=upstream.status_code)
    if upstream.status_code == 200 and isinstance(answer, dict):
        await ctx.farm.catalog_refresh.worker(link)
        answer = _namespaced_upload(answer, link.name)
    return JSONResponse(answer, status_code=upstream.status_code)


def _namespaced_upload(answer: dict[str, Any], worker: str) -> dict[str, Any]:
    if answer.get("type") not in NAMESPACED_TYPES:
        return answer
    listed = namespace_output({"f": [{**answer, "filename": answer.get("name")}]}, worker)
    return {**answer, "subfolder": listed["f"][0]["subfolder"]}
