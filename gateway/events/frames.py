"""Events bound for clients, and how they travel between gateway nodes.

Producers (the relay of each worker, the dispatcher) publish on one Redis pub/sub channel;
every node's hub delivers the frames of the clients connected to it. So a client connected
to node A sees the events of its job running on node B, in the order B published them.

Wire envelope (bytes): the publishing node's 8-byte id, one kind byte, a 2-byte big-endian
length, the client id (utf-8), then the payload. A node delivers its own events to its own
sockets at once and skips them when they come back from Redis. Kinds: `t` a text frame
(ComfyUI JSON), `b` a binary frame (preview), `s` the farm's queue length for a `status`
broadcast (no client id).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from workers.comfy.messages import BinaryKind, EventKind

BROADCAST = ""
"""The client id of a frame for every socket: ComfyUI broadcasts the progress of a prompt
that has no client_id."""


@dataclass(frozen=True)
class ClientFrame:
    """One frame for the sockets of one client (every socket: `BROADCAST`): JSON text or a
    binary preview."""

    client_id: str
    text: str | None = None
    data: bytes | None = None


@dataclass(frozen=True)
class QueueStatus:
    """The farm's queue length changed: every socket gets a `status` frame."""

    queue_remaining: int


Envelope = ClientFrame | QueueStatus


ORIGIN_BYTES = 8


def encode(event: Envelope, origin: bytes = bytes(ORIGIN_BYTES)) -> bytes:
    if isinstance(event, QueueStatus):
        return origin + b"s" + struct.pack(">H", 0) + str(event.queue_remaining).encode()
    cid = event.client_id.encode()
    if event.text is not None:
        return origin + b"t" + struct.pack(">H", len(cid)) + cid + event.text.encode()
    return origin + b"b" + struct.pack(">H", len(cid)) + cid + (event.data or b"")


def origin_of(raw: bytes) -> bytes:
    return raw[:ORIGIN_BYTES]


def decode(raw: bytes) -> Envelope | None:
    """The event in an envelope, or None for one this version does not know."""
    raw = raw[ORIGIN_BYTES:]
    if len(raw) < 3:
        return None
    kind, (size,) = raw[:1], struct.unpack(">H", raw[1:3])
    client_id, payload = raw[3 : 3 + size].decode(), raw[3 + size :]
    if kind == b"t":
        return ClientFrame(client_id, text=payload.decode())
    if kind == b"b":
        return ClientFrame(client_id, data=payload)
    if kind == b"s":
        return QueueStatus(int(payload))
    return None


def text_frame(client_id: str, kind: str, data: Any) -> ClientFrame:
    return ClientFrame(client_id, text=json.dumps({"type": kind, "data": data}))


def status_message(queue_remaining: int, sid: str | None = None) -> str:
    data: dict[str, Any] = {"status": {"exec_info": {"queue_remaining": queue_remaining}}}
    if sid is not None:
        data["sid"] = sid
    return json.dumps({"type": EventKind.STATUS.value, "data": data})


def binary_event(frame: bytes) -> int:
    return int(struct.unpack(">I", frame[:4])[0]) if len(frame) >= 4 else 0


def preview_prompt_id(frame: bytes) -> str | None:
    """The prompt id carried by a type-4 preview (previews of other types carry none)."""
    if binary_event(frame) != BinaryKind.PREVIEW_IMAGE_WITH_METADATA or len(frame) < 8:
        return None
    (size,) = struct.unpack(">I", frame[4:8])
    try:
        meta = json.loads(frame[8 : 8 + size])
    except ValueError:
        return None
    prompt_id = meta.get("prompt_id") if isinstance(meta, dict) else None
    return str(prompt_id) if prompt_id else None


def preview_without_metadata(frame: bytes) -> bytes:
    """A type-4 preview as the type-1 frame that clients without the feature flag expect."""
    if binary_event(frame) != BinaryKind.PREVIEW_IMAGE_WITH_METADATA or len(frame) < 8:
        return frame
    (size,) = struct.unpack(">I", frame[4:8])
    try:
        meta = json.loads(frame[8 : 8 + size])
    except ValueError:
        return frame
    image_type = 2 if isinstance(meta, dict) and meta.get("image_type") == "image/png" else 1
    return struct.pack(">II", BinaryKind.PREVIEW_IMAGE, image_type) + frame[8 + size :]
