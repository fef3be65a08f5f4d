"""Reduce WebSocket messages to what the contract fixes: type, data keys and the few values that
do not depend on time or ids (node ids, step counts, queue lengths, node states)."""

from __future__ import annotations

from typing import Any

from tests.contract.sockets import Message


def shape(message: Message) -> tuple[str, tuple[str, ...], Any]:
    kind, data = message["type"], message["data"]
    return kind, tuple(sorted(data)), _detail(kind, data)


def _detail(kind: str, data: dict[str, Any]) -> Any:
    if kind == "status":
        return data["status"]["exec_info"]["queue_remaining"]
    if kind in ("executing", "executed"):
        return data["node"]
    if kind == "progress":
        return data["value"], data["max"], data["node"]
    if kind == "execution_cached":
        return tuple(data["nodes"])
    if kind == "progress_state":
        return tuple(
            (node, state["state"], tuple(sorted(state))) for node, state in data["nodes"].items()
        )
    return None


def shapes(messages: list[Message]) -> list[tuple[str, tuple[str, ...], Any]]:
    return [shape(m) for m in messages]


def executing_nodes(messages: list[Message]) -> list[str]:
    """The nodes announced by `executing`, in order, without the final `node: null`."""
    return [
        m["data"]["node"]
        for m in messages
        if m["type"] == "executing" and m["data"]["node"] is not None
    ]


def of_type(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [m["data"] for m in messages if m["type"] == kind]
