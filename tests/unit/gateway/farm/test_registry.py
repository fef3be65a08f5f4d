"""The worker registry in Redis: a draining node keeps taking prompts only while another node
has a ready worker with a fresh record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.dispatch.estimated import FarmEstimates
from gateway.dispatch.links import Links
from gateway.farm.registry import STALE_REGISTRY_MS, Registry
from gateway.jobs.store import JobStore
from tests.unit.gateway.conftest import FakeClock


def registry(store: JobStore) -> Registry:
    links = Links([])
    return Registry(store, links, FarmEstimates(links), node="me")


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
    assert await registry(store).other_node_serving() is serving


async def test_the_records_of_every_node_are_read_back_in_name_order(store: JobStore) -> None:
    await publish(store, b=dict(node="other"), a=dict(node="third"))
    records = await registry(store).records()
    assert [record["node"] for record in records] == ["third", "other"]
