"""Event envelopes between nodes, and preview frames."""

from __future__ import annotations

import json
import struct

from gateway.events.frames import (
    ClientFrame,
    QueueStatus,
    decode,
    encode,
    preview_prompt_id,
    preview_without_metadata,
)


def test_envelopes_round_trip() -> None:
    for event in (
        ClientFrame("c1", text='{"type": "x"}'),
        ClientFrame("c2", data=b"\x00\x01"),
        QueueStatus(12),
    ):
        assert decode(encode(event)) == event


def test_metadata_previews_name_their_prompt_and_convert_to_type_1() -> None:
    meta = json.dumps({"prompt_id": "p1", "image_type": "image/png"}).encode()
    frame = struct.pack(">II", 4, len(meta)) + meta + b"PNGDATA"
    assert preview_prompt_id(frame) == "p1"
    assert preview_without_metadata(frame) == struct.pack(">II", 1, 2) + b"PNGDATA"
    plain = struct.pack(">II", 1, 1) + b"JPEG"
    assert preview_prompt_id(plain) is None
    assert preview_without_metadata(plain) == plain
