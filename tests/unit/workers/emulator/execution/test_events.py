"""Frame encodings (PROTOCOL.md 2.2, 2.4)."""

from __future__ import annotations

import json
import struct

from workers.emulator.execution import events


def test_text_frames_use_json_dumps_default_separators() -> None:
    frame = events.status(2).frame()
    assert frame == '{"type": "status", "data": {"status": {"exec_info": {"queue_remaining": 2}}}}'


def test_greeting_and_reconnect_frames() -> None:
    greeting = events.status(0, sid="c", greet=True)
    assert json.loads(greeting.frame())["data"]["sid"] == "c"
    assert greeting.sid == "c"
    assert json.loads(events.reconnect_executing("3", "c").frame()) == {
        "type": "executing",
        "data": {"node": "3"},
    }


def test_legacy_preview_frame() -> None:
    frame = events.Preview(b"JPEGDATA", "JPEG", None).frame()
    assert frame == struct.pack(">II", 1, 1) + b"JPEGDATA"
    assert events.Preview(b"P", "PNG", None).frame()[:8] == struct.pack(">II", 1, 2)


def test_metadata_preview_frame() -> None:
    meta = events.preview_metadata("3", "p")
    frame = events.Preview(b"IMG", "JPEG", "c", meta).frame()
    kind, length = struct.unpack(">II", frame[:8])
    assert kind == 4
    header = json.loads(frame[8 : 8 + length])
    assert header == {
        "node_id": "3",
        "prompt_id": "p",
        "display_node_id": "3",
        "parent_node_id": None,
        "real_node_id": "3",
        "image_type": "image/jpeg",
    }
    assert frame[8 + length :] == b"IMG"
