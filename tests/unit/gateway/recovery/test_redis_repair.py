"""After a Redis restart that lost writes: held jobs reasserted, recent jobs enqueued again."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import redis.asyncio as aioredis

from gateway.dispatch.links import Held, Links, WorkerLink
from gateway.dispatch.outcomes import Outcomes
from gateway.events.hub import Hub
from gateway.jobs.journal import Accepted, Journal
from gateway.jobs.keys import Keys
from gateway.jobs.models import JobRecord, JobState
from gateway.jobs.store import JobStore
from gateway.recovery.redis_repair import RedisRestarts
from tests.unit.gateway.conftest import FakeClock
from tests.unit.gateway.jobs.test_store import new_job
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec
from workers.supervision.ports import free_port


async def claimed(store: JobStore, worker: str = "w1") -> JobRecord:
    job = new_job()
    await store.enqueue(job)
    record = await store.claim(job.job_id, worker)
    assert record is not None
    return record


async def roll_back_claim(store: JobStore, record: JobRecord, worker: str = "w1") -> None:
    """As if the claim of `record` never reached the disk: pending again, one attempt lower."""
    r, k, job_id = store.redis, store.keys, record.job_id
    await r.hset(k.job(job_id), mapping={"state": "pending", "attempt": record.attempt - 1})
    await r.hdel(k.job(job_id), "worker", "claimed_at_ms")
    await r.zadd(k.pending, {job_id: record.score})
    await r.zrem(k.leases, job_id)
    await r.srem(k.worker_jobs(worker), job_id)
    await r.rpop(k.attempts(job_id))


async def forget_job(store: JobStore, job_id: str, worker: str = "w1") -> None:
    """As if the job's enqueue (and so everything after it) never reached the disk."""
    r, k = store.redis, store.keys
    await r.delete(k.job(job_id), k.attempts(job_id))
    await r.zrem(k.leases, job_id)
    await r.zrem(k.pending, job_id)
    await r.srem(k.worker_jobs(worker), job_id)


async def assert_held_by(store: JobStore, job_id: str, worker: str, attempt: int) -> JobRecord:
    job = await store.get(job_id)
    assert job is not None
    assert (job.state, job.worker, job.attempt) == (JobState.ASSIGNED, worker, attempt)
    assert job_id not in await store.pending_ids()
    assert job_id in await store.held_ids()
    assert job_id in await store.worker_job_ids(worker)
    assert [a["attempt"] for a in await store.attempts(job_id)] == list(range(1, attempt + 1))
    return job


async def test_a_job_whose_claim_was_lost_is_held_again_by_its_worker(store: JobStore) -> None:
    record = await claimed(store)
    await roll_back_claim(store, record)
    assert await store.reassert_held(record.job_id, "w1", 1, record, None) == 1
    job = await assert_held_by(store, record.job_id, "w1", 1)
    assert job.claimed_at_ms == record.claimed_at_ms


async def test_a_job_redis_lost_entirely_is_recreated_from_its_claimed_record(
    store: JobStore,
) -> None:
    record = await claimed(store)
    await forget_job(store, record.job_id)
    assert await store.reassert_held(record.job_id, "w1", 1, record, 1234) == 1
    job = await store.get(record.job_id)
    assert job is not None
    assert job.state is JobState.RUNNING
    assert job.started_at_ms == 1234
    expected = {"state": JobState.RUNNING, "started_at_ms": 1234}
    assert job.__dict__ == {**record.__dict__, **expected}
    assert job.score == record.score


async def test_reasserting_a_job_already_held_so_changes_nothing(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    record = await claimed(store)
    before = await redis_client.hgetall(store.keys.job(record.job_id))
    attempts = await store.attempts(record.job_id)
    assert await store.reassert_held(record.job_id, "w1", 1, record, None) == 2
    assert await redis_client.hgetall(store.keys.job(record.job_id)) == before
    assert await store.attempts(record.job_id) == attempts
    await assert_held_by(store, record.job_id, "w1", 1)


async def test_an_ended_superseded_or_requeued_job_is_left_alone(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    done = await claimed(store)
    await store.finish(done.job_id, "w1", 1, JobState.SUCCESS, {"status": {}})
    requeued = await claimed(store)
    await store.requeue(requeued.job_id, "w1", 1, failed=False, outcome="lost", give_up_entry={})
    superseded = await claimed(store)
    await redis_client.hset(store.keys.job(superseded.job_id), "attempt", 2)
    for record in (done, requeued, superseded):
        before = await redis_client.hgetall(store.keys.job(record.job_id))
        assert await store.reassert_held(record.job_id, "w1", 1, record, None) == 0
        assert await redis_client.hgetall(store.keys.job(record.job_id)) == before


async def test_a_job_rolled_back_to_an_older_attempt_elsewhere_moves_to_its_worker(
    store: JobStore,
) -> None:
    first = await claimed(store, "w0")
    await store.requeue(first.job_id, "w0", 1, failed=False, outcome="lost", give_up_entry={})
    second = await store.claim(first.job_id, "w1")
    assert second is not None and second.attempt == 2
    # Roll back the requeue and the second claim: w0 holds it under attempt 1.
    r, k = store.redis, store.keys
    await r.rpop(k.attempts(first.job_id))
    await r.hset(k.job(first.job_id), mapping={"attempt": 1, "worker": "w0"})
    await r.sadd(k.worker_jobs("w0"), first.job_id)
    await r.srem(k.worker_jobs("w1"), first.job_id)
    await r.lset(k.attempts(first.job_id), -1, json.dumps({"attempt": 1, "worker": "w0"}))
    assert await store.reassert_held(first.job_id, "w1", 2, second, None) == 1
    await assert_held_by(store, first.job_id, "w1", 2)
    assert first.job_id not in await store.worker_job_ids("w0")
    assert (await store.attempts(first.job_id))[0]["outcome"] == "lost in a Redis restart"


async def test_the_counter_is_raised_never_lowered(store: JobStore) -> None:
    await store.enqueue(new_job())
    await store.enqueue(new_job())
    assert await store.raise_counter(7)
    assert not await store.raise_counter(3)
    assert (await store.enqueue(new_job())).number == 7.0


def link(name: str) -> WorkerLink:
    handle = WorkerHandle(WorkerSpec(name), "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s")


@contextlib.asynccontextmanager
async def no_pause() -> AsyncIterator[None]:
    yield


async def test_a_restart_reasserts_held_jobs_and_restores_lost_accepted_ones(
    store: JobStore, clock: FakeClock
) -> None:
    worker = link("w1")
    journal = Journal(10.0, clock=clock)
    restarts = RedisRestarts(store, Links([worker]), journal, no_pause, clock=clock)
    assert await restarts.ready()
    held_record = await claimed(store)
    worker.hold(held_record.job_id, Held(1, "c1", record=held_record, sid="s"))
    lost = new_job()
    await store.enqueue(lost)
    journal.record(Accepted(replace(lost, number=1), 55, True))
    await roll_back_claim(store, held_record)
    await forget_job(store, lost.job_id)
    await store.redis.set(store.keys.counter, 1)

    restarts.run_id = "an older run"
    clock.advance(1.0)
    assert await restarts.ready()
    await assert_held_by(store, held_record.job_id, "w1", 1)
    back = await store.get(lost.job_id)
    assert back is not None
    assert (back.state, back.number, back.enqueued_at_ms) == (JobState.PENDING, 1.0, 55)
    assert (await store.enqueue(new_job())).number == 2.0
    assert restarts.run_id == await store.run_id()


async def test_a_new_connection_to_a_restarted_redis_makes_it_suspect(
    store: JobStore, redis_url: str, clock: FakeClock
) -> None:
    restarts = RedisRestarts(store, Links([]), Journal(clock=clock), no_pause, clock=clock)
    client = aioredis.from_url(redis_url, redis_connect_func=restarts.on_connect)
    try:
        assert await restarts.ready()
        assert await client.ping()
        assert not restarts.suspected
        restarts.run_id = "an older run"
        await client.connection_pool.disconnect()
        assert await client.ping()
        assert restarts.suspected
        assert await restarts.ready()
        assert not restarts.suspected
    finally:
        await client.aclose()


async def test_an_unreachable_redis_is_not_ready_and_raises_nothing(clock: FakeClock) -> None:
    client = aioredis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=1)
    store = JobStore(client, Keys("t"), clock=clock)
    restarts = RedisRestarts(store, Links([]), Journal(clock=clock), no_pause, clock=clock)
    try:
        assert not await restarts.ready()
        assert restarts.suspected
    finally:
        await client.aclose()


async def test_a_job_that_ends_after_redis_lost_its_claim_is_recorded_not_sent_again(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    worker = link("w1")
    record = await claimed(store)
    held = Held(1, "c1", record=record, sid="s")
    worker.hold(record.job_id, held)
    await roll_back_claim(store, record)
    outcomes = Outcomes(store, Hub(redis_client, "t:events", store.queue_remaining), lambda: None)
    entry = {
        "prompt": [0, record.job_id, {}, {}, ["9"]],
        "outputs": {},
        "status": {"status_str": "success", "completed": True, "messages": []},
    }
    assert await outcomes.complete(worker, record.job_id, held, entry)
    job = await store.get(record.job_id)
    assert job is not None and job.state is JobState.SUCCESS
    assert await store.pending_ids() == []
    assert await store.history_ids(0, -1) == [record.job_id]
