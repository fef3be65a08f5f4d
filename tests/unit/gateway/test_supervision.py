"""A draining node keeps taking prompts only while another node has a ready worker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.jobs import JobStore
from gateway.links import Links
from gateway.supervision import STALE_REGISTRY_MS, Supervision
from tests.unit.gateway.conftest import FakeClock


async def nothing() -> None:
    return None


def supervision(store: JobStore) -> Supervision:
    links = Links([])
    return Supervision(store, links, None, None, nothing, node="me")  # type: ignore[arg-type]


async def publish(store: JobStore, **records: dict[str, Any]) -> None:
    mapping = {name: json.dumps(record) for name, record in records.items()}
    await store.redis.hset(store.keys.workers, mapping=mapping)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node", "state", "age_ms", "serving"),
    [
        ("other", "ready", 0, True),
        ("other", "ready", STALE_REGISTRY_MS + 1, False),
        ("other", "draining", 0, False),
        ("other", "failed", 0, False),
        ("me", "ready", 0, False),
    ],
)
async def test_another_node_serves_only_with_a_fresh_ready_worker(
    store: JobStore, clock: FakeClock, node: str, state: str, age_ms: int, serving: bool
) -> None:
    heartbeat_ms = store.now_ms() - age_ms
    await publish(store, w=dict(node=node, state=state, heartbeat_ms=heartbeat_ms))
    assert await supervision(store).other_node_serving() is serving
