"""Queue routes: /prompt, /queue, /history, /interrupt, /free (PROTOCOL.md 1.1-1.3, 1.7).

Handlers read their JSON bodies the way ComfyUI does (no type checks): a body ComfyUI chokes on
raises here too, and the middleware turns that into aiohttp's 500.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.execution import admission, events
from workers.emulator.http.responses import empty, json_response
from workers.emulator.http.routes.common import RouteTable, emulator_of, query, read_json

log = logging.getLogger(__name__)

NO_PROMPT = {
    "type": "no_prompt",
    "message": "No prompt provided",
    "details": "No prompt provided",
    "extra_info": {},
}


async def get_prompt(request: Request) -> Response:
    return json_response(events.queue_info(emulator_of(request).queue.tasks_remaining()))


def field(body: Any, key: str, default: Any = None) -> Any:
    """`body[key]` when `key in body`, else `default`: ComfyUI's own test, whatever the body
    is (a JSON list or string behaves as Python makes it, a number raises)."""
    if key in body:
        return body[key]
    return default


def _number(body: Any, request: Request) -> Any:
    """An explicit `number` (as float; the counter untouched), else the counter (negated for
    `front`), which advances even when the request then fails."""
    if "number" in body:
        return float(body["number"])
    front = bool(field(body, "front", False))
    return emulator_of(request).queue.next_number(front)


async def post_prompt(request: Request) -> Response:
    log.info("got prompt")
    emulator = emulator_of(request)
    body = await read_json(request)
    number = _number(body, request)
    if "prompt" not in body:
        return json_response({"error": NO_PROMPT, "node_errors": {}}, 400)
    prompt = body["prompt"]
    prompt_id = str(body.get("prompt_id", uuid.uuid4()))
    targets = field(body, "partial_execution_targets")
    inject = emulator.faults.take_validation_failure()
    valid = admission.validate(prompt, targets, emulator.catalog, inject)
    extra_data = field(body, "extra_data", {})
    if "client_id" in body:
        extra_data["client_id"] = body["client_id"]
    if not valid.ok:
        log.warning("invalid prompt: %s", valid.error)
        return json_response(valid.response_body(), 400)
    emulator.queue.put((number, prompt_id, valid.prompt, extra_data, valid.outputs))
    return json_response(
        {"prompt_id": prompt_id, "number": number, "node_errors": valid.node_errors}
    )


async def get_queue(request: Request) -> Response:
    queue = emulator_of(request).queue
    return json_response({"queue_running": queue.running(), "queue_pending": queue.pending()})


async def post_queue(request: Request) -> Response:
    queue = emulator_of(request).queue
    body = await read_json(request)
    if field(body, "clear"):
        queue.wipe()
    if "delete" in body:
        for prompt_id in body["delete"]:
            queue.delete(prompt_id)
    return empty()


async def get_history(request: Request) -> Response:
    params = query(request)
    max_items = int(params["max_items"]) if "max_items" in params else None
    offset = int(params["offset"]) if "offset" in params else -1
    history = emulator_of(request).queue.history(max_items=max_items, offset=offset)
    return json_response(history)


async def get_history_item(request: Request) -> Response:
    prompt_id = request.path_params["prompt_id"]
    return json_response(emulator_of(request).queue.history(prompt_id=prompt_id))


async def post_history(request: Request) -> Response:
    queue = emulator_of(request).queue
    body = await read_json(request)
    if field(body, "clear"):
        queue.wipe_history()
    if "delete" in body:
        for prompt_id in body["delete"]:
            queue.delete_history(prompt_id)
    return empty()


async def post_interrupt(request: Request) -> Response:
    """Only the running prompt named by `prompt_id`; without one, whatever runs."""
    emulator = emulator_of(request)
    try:
        body = await read_json(request)
    except json.JSONDecodeError:
        body = {}
    prompt_id = body.get("prompt_id")
    if not prompt_id:
        log.info("Global interrupt (no prompt_id specified)")
        emulator.engine.interrupt()
    elif prompt_id in emulator.queue.running_ids():
        log.info("Interrupting prompt %s", prompt_id)
        emulator.engine.interrupt()
    else:
        log.info("Prompt %s is not currently running, skipping interrupt", prompt_id)
    return empty()


async def post_free(request: Request) -> Response:
    """Flags the worker applies when it next wakes (at once when idle)."""
    queue = emulator_of(request).queue
    body = await read_json(request)
    unload_models = body.get("unload_models", False)
    free_memory = body.get("free_memory", False)
    if unload_models:
        queue.set_flag("unload_models", unload_models)
    if free_memory:
        queue.set_flag("free_memory", free_memory)
    return empty()


ROUTES: RouteTable = [
    ("GET", "/prompt", get_prompt),
    ("POST", "/prompt", post_prompt),
    ("GET", "/queue", get_queue),
    ("POST", "/queue", post_queue),
    ("GET", "/history", get_history),
    ("GET", "/history/{prompt_id}", get_history_item),
    ("POST", "/history", post_history),
    ("POST", "/interrupt", post_interrupt),
    ("POST", "/free", post_free),
]
