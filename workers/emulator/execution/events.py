"""What a ComfyUI 0.3.64 server sends on its WebSocket, as typed values.

The engine only builds these; the socket hub only delivers them. Every JSON body is built here,
so the frame shapes of PROTOCOL.md section 2 live in one module.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.comfy.messages import BinaryKind, EventKind

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One JSON text frame `{"type": kind, "data": data}`; `sid` None means every socket."""

    kind: EventKind
    data: Mapping[str, Any]
    sid: str | None = None

    def frame(self) -> str:
        # json.dumps with its default separators: byte-identical to aiohttp's send_json.
        return json.dumps({"type": self.kind.value, "data": self.data})


@dataclass(frozen=True)
class Preview:
    """A preview image for the prompt's client (or every socket when `sid` is None).

    ComfyUI emits each preview twice at two points of the progress hook: the type-4 frame
    (`metadata` set) reaches only a client that negotiated `supports_preview_metadata`, the
    type-1 frame (`metadata` None) only sockets that did not. The hub applies that rule.
    """

    image: bytes
    image_format: str
    sid: str | None
    metadata: Mapping[str, Any] | None = None

    def frame(self) -> bytes:
        if self.metadata is None:
            image_type = 1 if self.image_format == "JPEG" else 2
            header = struct.pack(">II", BinaryKind.PREVIEW_IMAGE, image_type)
            return header + self.image
        mime = "image/png" if self.image_format == "PNG" else "image/jpeg"
        meta = json.dumps({**self.metadata, "image_type": mime}).encode("utf-8")
        header = struct.pack(">II", BinaryKind.PREVIEW_IMAGE_WITH_METADATA, len(meta))
        return header + meta + self.image


Event = Message | Preview


def queue_info(queue_remaining: int) -> JsonDict:
    """The body of `GET /prompt` and of every `status` frame."""
    return {"exec_info": {"queue_remaining": queue_remaining}}


def status(queue_remaining: int, *, sid: str | None = None, greet: bool = False) -> Message:
    """A `status` frame: broadcast on queue changes, or the greeting (with `sid`) on connect."""
    data: JsonDict = {"status": queue_info(queue_remaining)}
    if greet:
        data["sid"] = sid
    return Message(EventKind.STATUS, data, sid)


def feature_flags(flags: Mapping[str, Any], sid: str) -> Message:
    return Message(EventKind.FEATURE_FLAGS, dict(flags), sid)


def reconnect_executing(node_id: str, sid: str) -> Message:
    """The frame a reconnecting client of the running prompt gets: no prompt_id (seen)."""
    return Message(EventKind.EXECUTING, {"node": node_id}, sid)


def executing(node_id: str, prompt_id: str, sid: str | None) -> Message:
    data = {"node": node_id, "display_node": node_id, "prompt_id": prompt_id}
    return Message(EventKind.EXECUTING, data, sid)


def executing_done(prompt_id: str, sid: str | None) -> Message:
    """The final `executing {node: null}`: the done signal clients wait for."""
    return Message(EventKind.EXECUTING, {"node": None, "prompt_id": prompt_id}, sid)


def executed(node_id: str, output: Any, prompt_id: str, sid: str | None) -> Message:
    data = {"node": node_id, "display_node": node_id, "output": output, "prompt_id": prompt_id}
    return Message(EventKind.EXECUTED, data, sid)


def progress(value: int, maximum: int, prompt_id: str, node_id: str, sid: str | None) -> Message:
    data = {"value": value, "max": maximum, "prompt_id": prompt_id, "node": node_id}
    return Message(EventKind.PROGRESS, data, sid)


def progress_state(prompt_id: str, nodes: Mapping[str, Any], sid: str | None) -> Message:
    return Message(EventKind.PROGRESS_STATE, {"prompt_id": prompt_id, "nodes": dict(nodes)}, sid)


def lifecycle(kind: EventKind, data: Mapping[str, Any], sid: str | None) -> Message:
    """execution_start / _cached / _success / _error / _interrupted (data carries timestamp)."""
    return Message(kind, dict(data), sid)


def interrupted_data(
    prompt_id: str, node_id: str, node_type: str, executed_ids: Sequence[str]
) -> JsonDict:
    return {
        "prompt_id": prompt_id,
        "node_id": node_id,
        "node_type": node_type,
        "executed": list(executed_ids),
    }


def preview_metadata(node_id: str, prompt_id: str) -> JsonDict:
    """The JSON header of a type-4 preview frame (image_type is added when encoding)."""
    return {
        "node_id": node_id,
        "prompt_id": prompt_id,
        "display_node_id": node_id,
        "parent_node_id": None,
        "real_node_id": node_id,
    }
