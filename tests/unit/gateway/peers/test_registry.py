"""Node registrations in Redis: worker names claimed atomically, and the jobs of a lapsed node
requeued once, never while it (or a node that took its workers) is live."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.dispatch.outcomes import Outcomes
from gateway.events.hub import Hub
from gateway.jobs.models import JobState
from gateway.jobs.store import JobStore
from gateway.peers.identity import node_name
from gateway.peers.registry import NameTaken, NodeRecord, Registry
from gateway.peers.takeover import OUTCOME, take_over
from tests.unit.gateway.jobs.test_store import new_job


def record(name: str, *workers: str) -> NodeRecord:
    return NodeRecord(name, f"http://{name}", 0, dict.fromkeys(workers, "ready"))


def registry(store: JobStore) -> Registry:
    return Registry(store.redis, store.keys, ttl_s=10.0)


async def lapse(store: JobStore, node: str) -> None:
    await store.redis.delete(store.keys.node(node))


async def test_a_worker_name_of_a_live_node_is_refused_and_free_once_it_lapsed(
    store: JobStore,
) -> None:
    nodes = registry(store)
    await nodes.join(record("a", "wa"))
    await nodes.join(record("b", "wb"))
    with pytest.raises(NameTaken, match="'wa' belongs to the live gateway node 'a'"):
        await nodes.join(record("c", "wc", "wa"))
    assert await nodes.owners() == {"wa": "a", "wb": "b"}  # nothing of c was written
    await lapse(store, "a")
    await nodes.join(record("c", "wc", "wa"))
    live, lapsed = await nodes.nodes()
    assert ([n.name for n in live], lapsed) == (["b", "c"], ["a"])


async def test_of_two_nodes_joining_at_once_with_one_worker_name_one_gets_it(
    store: JobStore,
) -> None:
    nodes = registry(store)
    results = await asyncio.gather(
        *(nodes.join(record(name, "same")) for name in ("a", "b")), return_exceptions=True
    )
    assert sum(isinstance(result, NameTaken) for result in results) == 1


async def claimed_by(store: JobStore, worker: str) -> str:
    job = new_job()
    await store.enqueue(job)
    assert await store.claim(job.job_id, worker) is not None
    return job.job_id


def outcomes(store: JobStore, redis_client: aioredis.Redis) -> Outcomes:
    return Outcomes(store, Hub(redis_client, "t:events", store.queue_remaining), lambda: None)


async def test_the_jobs_of_a_lapsed_node_are_requeued_once_by_nodes_racing_for_them(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    nodes = registry(store)
    await nodes.join(record("b", "wb"))
    job_id = await claimed_by(store, "wb")
    ends = outcomes(store, redis_client)
    assert await take_over(store, ends, nodes, [], set()) == 0
    await lapse(store, "b")
    _, lapsed = await nodes.nodes()
    counts = await asyncio.gather(*(take_over(store, ends, nodes, lapsed, set()) for _ in "ac"))
    assert sorted(counts) == [0, 1]
    job = await store.get(job_id)
    assert job is not None and job.state is JobState.PENDING
    assert [a["outcome"] for a in await store.attempts(job_id)] == [OUTCOME]


async def test_a_node_back_before_the_take_over_keeps_its_jobs(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    nodes = registry(store)
    await nodes.join(record("b", "wb"))
    job_id = await claimed_by(store, "wb")
    await lapse(store, "b")
    _, lapsed = await nodes.nodes()  # seen lapsed ...
    await nodes.join(record("b", "wb"))  # ... and back before the take-over
    assert await take_over(store, outcomes(store, redis_client), nodes, lapsed, set()) == 0
    job = await store.get(job_id)
    assert job is not None and job.state is JobState.ASSIGNED


def test_a_node_keeps_its_name_in_its_data_dir(tmp_path: Path) -> None:
    first = node_name(tmp_path / "data")
    assert node_name(tmp_path / "data") == first
    assert node_name(tmp_path / "other") != first
