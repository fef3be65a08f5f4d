"""Request bodies of the ComfyUI routes, parsed by hand: fast, and every fault a clear 400."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadRequest

MAX_PRIORITY = 1000
MAX_PROMPT_ID_CHARS = 256
MAX_JSON_DEPTH = 100
"""Nesting deeper than this is refused: encoding it again (to Redis, to a worker) would run
out of stack, and no ComfyUI workflow comes near it."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class PromptRequest:
    prompt: Any
    client_id: str | None
    prompt_id: str | None
    extra_data: dict[str, Any]
    front: bool
    number: float | None
    targets: list[str] | None
    priority: int
    group: str | None


class _NotForwardable(ValueError):
    """Valid for Python's json module, but not JSON that a worker can be sent."""


def parse_json(body: bytes) -> Any:
    """The body as JSON that can be stored and forwarded unchanged: UTF-8, finite numbers, no
    lone surrogate, nested at most MAX_JSON_DEPTH deep. Anything else is a BadRequest (400)
    saying what is wrong, never a server error."""
    try:
        text = body.decode("utf-8")
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except _NotForwardable as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", kind="invalid_json") from None
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        # ComfyUI answers 500 here; a malformed body is the client's fault.
        raise BadRequest(f"body is not valid JSON: {exc}", kind="invalid_json") from None
    _check_depth(body, data)
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(data)
    return data


def _no_constant(name: str) -> Any:
    # Python reads NaN and Infinity; JSON has no such numbers and httpx refuses to send them.
    raise _NotForwardable(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotForwardable(f"{text[:40]} is out of range for a number")
    return value


def _too_deep() -> BadRequest:
    return BadRequest(f"body is nested more than {MAX_JSON_DEPTH} levels deep", kind="invalid_json")


def _check_depth(body: bytes, data: Any) -> None:
    """Raise when `data` nests deeper than MAX_JSON_DEPTH (a body with fewer brackets than
    that cannot, so most bodies are never walked)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _check_surrogates(data: Any) -> None:
    """Raise for a lone surrogate (`"\\ud800"`): it cannot be encoded as UTF-8, so neither
    Redis nor a worker could be sent it. Escaped surrogate pairs are well-formed and pass."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        raise BadRequest(
            f"body is not valid JSON: a lone surrogate ({bad}) is not a Unicode character",
            kind="invalid_json",
        ) from None


def parse_prompt_request(body: bytes) -> PromptRequest:
    data = parse_json(body)
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object", kind="invalid_prompt")
    if "prompt" not in data:
        raise BadRequest("No prompt provided", kind="no_prompt", details="No prompt provided")
    extra = _extra_data(data.get("extra_data"))
    client_id = data.get("client_id")
    if client_id is not None:
        client_id = str(client_id)
        extra["client_id"] = client_id
    priority, group = _hints(extra)
    return PromptRequest(
        prompt=data["prompt"],
        client_id=client_id,
        prompt_id=_prompt_id(data.get("prompt_id")),
        extra_data=extra,
        front=bool(data.get("front")),
        number=_number(data.get("number")),
        targets=_targets(data.get("partial_execution_targets")),
        priority=priority,
        group=group,
    )


def _extra_data(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("extra_data must be an object", kind="invalid_prompt")
    return dict(value)


def _prompt_id(value: Any) -> str | None:
    """ComfyUI takes any value and `str()`s it; the gateway only bounds its length (the id
    names Redis keys and travels in URLs, where it is always quoted)."""
    if value is None:
        return None
    text = str(value)
    if not text or len(text) > MAX_PROMPT_ID_CHARS:
        raise BadRequest(
            f"prompt_id must be 1 to {MAX_PROMPT_ID_CHARS} characters, got {len(text)}",
            kind="invalid_prompt_id",
        )
    return text


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest("number must be a number", kind="invalid_prompt")
    return float(value)


def _targets(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BadRequest("partial_execution_targets must be a list", kind="invalid_prompt")
    return [str(item) for item in value]


def _hints(extra: dict[str, Any]) -> tuple[int, str | None]:
    """`extra_data.gateway = {"priority": int, "group": str}`: placement hints."""
    hints = extra.get("gateway")
    if hints is None:
        return 0, None
    if not isinstance(hints, dict):
        raise BadRequest("extra_data.gateway must be an object", kind="invalid_prompt")
    priority = hints.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise BadRequest("extra_data.gateway.priority must be an integer", kind="invalid_prompt")
    if abs(priority) > MAX_PRIORITY:
        raise BadRequest(
            f"extra_data.gateway.priority must be within ±{MAX_PRIORITY}", kind="invalid_prompt"
        )
    group = hints.get("group")
    if group is not None and not isinstance(group, str):
        raise BadRequest("extra_data.gateway.group must be a string", kind="invalid_prompt")
    return priority, group


def parse_id_list(data: Any, key: str) -> list[str]:
    value = data.get(key) if isinstance(data, dict) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{key} must be a list of prompt ids", kind="invalid_request")
    return [str(item) for item in value]
