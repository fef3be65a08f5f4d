"""ComfyUI's queue routes over the farm: /prompt, /queue, /history, /interrupt."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.api.browsers import COOKIE as BROWSER_COOKIE
from gateway.api.browsers import valid_browser_id
from gateway.api.deps import AUTH_HINT, Context, Ctx, get_context, is_operator, read_body
from gateway.api.schemas import parse_id_list, parse_json
from gateway.dispatch.links import WorkerLink
from gateway.errors import BadRequest, Forbidden
from gateway.jobs.history import gateway_block
from gateway.jobs.models import HELD, JobRecord, JobState
from gateway.peers import forward
from gateway.peers.client import from_peer
from workers.client import WorkerError

router = APIRouter()
JSON = "application/json"
SMALL_BODY = 1024 * 1024
MAX_INDEX = 2**53


@router.post("/prompt")
async def post_prompt(request: Request) -> Response:
    ctx = get_context(request)  # the hot path: no dependency resolution
    body = await read_body(request, ctx.settings.max_prompt_bytes, "max_prompt_mib")
    answer = await ctx.acceptor.accept(body, request.headers.get("idempotency-key"))
    return JSONResponse(answer)


@router.get("/prompt")
async def get_prompt(ctx: Ctx) -> Response:
    remaining = await ctx.store.queue_remaining()
    return JSONResponse({"exec_info": {"queue_remaining": remaining}})


async def current_queue(ctx: Context) -> tuple[list[JobRecord], list[JobRecord]]:
    """(running, waiting) jobs of the farm, the waiting ones by number: the pending and held
    ids (`JobStore.queued_ids`), each job placed by the state its record has when read, so one
    claimed or started meanwhile is listed once, where it is then."""
    jobs = await ctx.store.get_many(await ctx.store.queued_ids())
    running = [job for job in jobs if job.state is JobState.RUNNING]
    waiting = [job for job in jobs if job.state in (JobState.ASSIGNED, JobState.PENDING)]
    return running, sorted(waiting, key=lambda job: job.number)


@router.get("/queue")
async def get_queue(ctx: Ctx) -> Response:
    running, waiting = await current_queue(ctx)
    running_items = ", ".join(job.queue_item_json() for job in running)
    waiting_items = ", ".join(job.queue_item_json() for job in waiting)
    body = f'{{"queue_running": [{running_items}], "queue_pending": [{waiting_items}]}}'
    return Response(body, media_type=JSON)


@router.post("/queue")
async def post_queue(request: Request, ctx: Ctx) -> Response:
    """`clear` empties the caller's own waiting prompts; the whole farm's with the bearer
    token (an operator action)."""
    data = await json_body(request)
    if isinstance(data, dict) and data.get("clear"):
        scope = await _clear_scope(ctx, request, data, "the queue")
        await ctx.farm.operations.clear_pending(scope)
        await _on_every_node(request, ctx, "/queue", _scoped_clear(scope))
    for job_id in parse_id_list(data, "delete"):
        await ctx.farm.operations.delete(job_id)
        await _on_owner(request, ctx, job_id, "/queue", {"delete": [job_id]})
    return Response(status_code=200)


@router.get("/history")
async def get_history(
    ctx: Ctx, max_items: str | None = None, offset: str | None = None
) -> Response:
    limit = _int_param("max_items", max_items)
    start = _int_param("offset", offset)
    count = await ctx.store.history_count()
    if (start is None or start < 0) and limit is not None:
        start = count - limit
    start = max(start or 0, 0)
    stop = -1 if limit is None else start + limit - 1
    if limit is not None and limit <= 0:
        return Response("{}", media_type=JSON)
    ids = await ctx.store.history_ids(start, stop)
    return Response(_entries_json(ids, await ctx.store.entries(ids)), media_type=JSON)


@router.get("/history/{prompt_id}")
async def get_history_entry(prompt_id: str, ctx: Ctx) -> Response:
    """ComfyUI's entry plus a `gateway` block: where the prompt ran and how often it was tried."""
    entry = await ctx.store.entry(prompt_id)
    record = await ctx.store.get(prompt_id)
    if entry is None or record is None:
        return Response(_entries_json([prompt_id], [entry]), media_type=JSON)
    body = json.loads(entry)
    attempts = await ctx.store.attempts(prompt_id)
    body["gateway"] = gateway_block(record, attempts, ctx.membership.groups())
    return JSONResponse({prompt_id: body})


@router.post("/history")
async def post_history(request: Request, ctx: Ctx) -> Response:
    """`clear` removes the caller's own entries; the whole farm's with the bearer token."""
    data = await json_body(request)
    if isinstance(data, dict) and data.get("clear"):
        scope = await _clear_scope(ctx, request, data, "the history")
        if scope is None:
            await ctx.store.clear_history()
        else:
            await ctx.store.delete_history(await ctx.store.history_of_clients(scope))
    await ctx.store.delete_history(parse_id_list(data, "delete"))
    return Response(status_code=200)


@router.post("/interrupt")
async def post_interrupt(request: Request, ctx: Ctx) -> Response:
    """With a prompt_id: that prompt. Without: only the caller's own running prompts (by
    client_id in the body or `?clientId=`, or its browser's), never the whole farm as
    ComfyUI would."""
    try:
        data = parse_json(await read_body(request, SMALL_BODY) or b"{}")
    except BadRequest:
        data = {}
    data = data if isinstance(data, dict) else {}
    if data.get("prompt_id"):
        job_id = str(data["prompt_id"])
        await ctx.farm.operations.interrupt(job_id)
        await _on_owner(request, ctx, job_id, "/interrupt", {"prompt_id": job_id})
        return Response(status_code=200)
    for client_id in await caller_client_ids(ctx, request, data):
        await ctx.farm.operations.interrupt_client(client_id)
        await _on_every_node(request, ctx, "/interrupt", {"client_id": client_id})
    return Response(status_code=200)


async def _on_every_node(request: Request, ctx: Context, path: str, body: dict[str, Any]) -> None:
    """The same request to every other live node, for what it does on its own workers (a
    request from another node is never passed on)."""
    if not from_peer(request):
        await forward.post_each(ctx.peers, list(ctx.membership.peers.values()), path, body)


async def _on_owner(
    request: Request, ctx: Context, job_id: str, path: str, body: dict[str, Any]
) -> None:
    """The same request to the node whose worker holds the job, when it is another node's
    (a request from another node is never passed on)."""
    if from_peer(request):
        return
    job = await ctx.store.get(job_id)
    if job is None or job.state not in HELD or not job.worker or ctx.farm.link(job.worker):
        return
    node = ctx.membership.node_of(job.worker)
    if node is not None:
        await forward.post_each(ctx.peers, [node], path, body)


async def caller_client_ids(ctx: Context, request: Request, data: dict[str, Any]) -> set[str]:
    """Who is asking: the client id in the body or the query (`clientId`, `client_id`), and
    every client id the caller's browser opened a WebSocket with (its cookie)."""
    named = data.get("client_id") or request.query_params.get("clientId")
    named = named or request.query_params.get("client_id")
    ids = {str(named)} if named else set()
    browser = valid_browser_id(request.cookies.get(BROWSER_COOKIE))
    if browser is not None:
        ids |= await ctx.browsers.client_ids(browser)
    return ids


def _scoped_clear(scope: set[str] | None) -> dict[str, Any]:
    return {"clear": True} if scope is None else {"clear": True, "client_ids": sorted(scope)}


async def _clear_scope(
    ctx: Context, request: Request, data: dict[str, Any], what: str
) -> set[str] | None:
    """The client ids whose items a clear removes; None: the whole farm's (the operator).
    `client_ids` in the body names them (as another node passes a scoped clear on)."""
    named = data.get("client_ids")
    if isinstance(named, list) and named:
        return {str(client_id) for client_id in named}
    if is_operator(ctx, request):
        return None
    ids = await caller_client_ids(ctx, request, data)
    if not ids:
        raise Forbidden(
            f"clearing {what} clears the caller's own items: send client_id (in the body or "
            "as ?clientId=), or open /ws from this browser first; clearing the whole farm's "
            f"needs the operator's bearer token ({AUTH_HINT})",
            kind="forbidden",
        )
    return ids


@router.post("/free")
async def post_free(request: Request, ctx: Ctx) -> Response:
    """Every worker of the farm frees what it is asked to (ComfyUI's /free acts on its one
    instance)."""
    data = await json_body(request)
    data = data if isinstance(data, dict) else {}
    unload_models = bool(data.get("unload_models"))
    free_memory = bool(data.get("free_memory"))
    links = ctx.farm.links.ready()
    await asyncio.gather(*(_free(link, unload_models, free_memory) for link in links))
    body = {"unload_models": unload_models, "free_memory": free_memory}
    await _on_every_node(request, ctx, "/free", body)
    return Response(status_code=200)


async def _free(link: WorkerLink, unload_models: bool, free_memory: bool) -> None:
    with contextlib.suppress(WorkerError):
        await link.client.free(unload_models=unload_models, free_memory=free_memory)
    if unload_models or free_memory:
        link.resident = ()  # ComfyUI unloads every model on either flag


async def json_body(request: Request) -> Any:
    """The small JSON body of a request; an empty body reads as `{}`."""
    body = await read_body(request, SMALL_BODY)
    return parse_json(body) if body.strip() else {}


def _int_param(name: str, value: str | None) -> int | None:
    """The integer, clamped to what Redis takes as an index (ComfyUI takes any size)."""
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"{name} must be an integer", kind="invalid_request") from None
    return max(-MAX_INDEX, min(number, MAX_INDEX))


def _entries_json(ids: list[str], entries: list[str | None]) -> str:
    parts = [f"{json.dumps(i)}: {e}" for i, e in zip(ids, entries, strict=True) if e is not None]
    return "{" + ", ".join(parts) + "}"
