"""The socket registry and publisher with fake sockets (PROTOCOL.md 2.1-2.4)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from workers.emulator.execution import events
from workers.emulator.http.ws import SocketHub

FEATURES = {"supports_preview_metadata": True, "max_upload_size": 104857600}


class Fake:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send_text(self, data: str) -> None:
        self.sent.append(json.loads(data))

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)


class Broken(Fake):
    async def send_text(self, data: str) -> None:
        raise ConnectionResetError("gone")


async def test_same_sid_reconnect_reproduces_comfyuis_bug() -> None:
    hub = SocketHub(FEATURES)
    old, new = Fake(), Fake()
    assert hub.connect("dup", old) == "dup"
    hub.connect("dup", new)
    await hub.deliver(events.status(1))
    assert (old.sent, len(new.sent)) == ([], 1)
    hub.disconnect("dup")  # the OLD socket closes...
    await hub.deliver(events.status(0))
    assert len(new.sent) == 1  # ...and the new one is no longer registered


async def test_fresh_sids_are_uuid_hex() -> None:
    hub = SocketHub(FEATURES)
    sid = hub.connect("", Fake())
    assert len(sid) == 32 and int(sid, 16) >= 0


async def test_first_frame_rules() -> None:
    hub = SocketHub(FEATURES)
    socket = Fake()
    hub.connect("c", socket)
    negotiate = json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}})
    assert await hub.on_text("c", "not json", True) is True
    assert await hub.on_text("c", "[1]", True) is True  # not an object: still the first
    assert await hub.on_text("c", negotiate, True) is False
    assert socket.sent == [{"type": "feature_flags", "data": FEATURES}]
    assert hub.supports_preview_metadata("c")
    assert await hub.on_text("c", json.dumps({"type": "other"}), True) is False


async def test_previews_reach_sockets_by_their_negotiation() -> None:
    hub = SocketHub(FEATURES)
    modern, legacy = Fake(), Fake()
    hub.connect("m", modern)
    hub.connect("l", legacy)
    hub.metadata["m"]["feature_flags"] = {"supports_preview_metadata": True}
    meta = events.preview_metadata("3", "p")
    for sid in ("m", "l", None):
        await hub.deliver(events.Preview(b"x", "JPEG", sid, meta))
        await hub.deliver(events.Preview(b"x", "JPEG", sid))
    kinds = {name: [frame[3] for frame in s.sent] for name, s in (("m", modern), ("l", legacy))}
    assert kinds == {"m": [4, 1], "l": [1, 1]}  # broadcasts are always type 1


async def test_a_failing_socket_does_not_stop_delivery() -> None:
    hub = SocketHub(FEATURES)
    good = Fake()
    hub.connect("bad", Broken())
    hub.connect("good", good)
    await hub.deliver(events.status(3))
    assert len(good.sent) == 1


async def test_a_stall_holds_events_until_it_ends() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    hub = SocketHub(FEATURES, clock=lambda: now[0], sleep=sleep)
    socket = Fake()
    hub.connect("c", socket)
    hub.stall_for(2.0)
    assert hub.stalled
    hub.emit(events.status(1))
    publisher = asyncio.create_task(hub.run())
    for _ in range(10000):
        if socket.sent:
            break
        await asyncio.sleep(0)
    publisher.cancel()
    assert now[0] >= 2.0
