"""Request bodies of the ComfyUI routes, parsed by hand: fast, and every fault a clear 400."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadRequest

MAX_PRIORITY = 1000
MAX_PROMPT_ID_CHARS = 256


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


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        # ComfyUI answers 500 here; a malformed body is the client's fault.
        raise BadRequest(f"body is not valid JSON: {exc}", kind="invalid_json") from None


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
