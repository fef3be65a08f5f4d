"""The group index in Redis: after any sequence of transitions, `queue_groups` is what
`queue.group_jobs` makes of every waiting job, at the cost of the jobs it shows."""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from gateway.app import load_policy
from gateway.dispatch.links import Links
from gateway.events.hub import Hub
from gateway.farm.catalog import FarmCatalog
from gateway.farm.node import Farm, FarmSettings
from gateway.jobs.models import JobRecord, JobState, NewJob, Placement
from gateway.jobs.store import JobStore
from gateway.scheduler import queue
from gateway.scheduler.snapshot import JobGroup
from tests.unit.gateway.conftest import FakeClock
from tests.unit.gateway.jobs.test_store import PROMPT


@dataclass(frozen=True)
class Mix:
    """What the jobs of one scenario look like."""

    checkpoints: tuple[str, ...] = ("a.safetensors",)
    loras: tuple[str, ...] = ()
    priorities: tuple[int, ...] = (0,)
    front: float = 0.0
    explicit_number: float = 0.0
    groups: tuple[str | None, ...] = (None,)
    eligible: tuple[tuple[str, ...] | None, ...] = (None,)
    head: int = queue.HEAD_JOBS


SCENARIOS = {
    "one class": Mix(head=4),
    "several checkpoints": Mix(
        checkpoints=("a.safetensors", "b.safetensors", "sdxl_c.safetensors", "flux_d.gguf"),
    ),
    "priorities, front and explicit numbers": Mix(
        checkpoints=("a.safetensors", "b.safetensors"),
        priorities=(0, 0, 0, 1, 5, -2),
        front=0.2,
        explicit_number=0.15,
        head=3,
    ),
    "loras, eligible sets and A/B groups": Mix(
        checkpoints=("a.safetensors", "b.safetensors"),
        loras=("l1.safetensors", "l2.safetensors"),
        groups=(None, None, "A", "B"),
        eligible=(None, ("w1",), ("w1", "w2"), ("w2", "w1")),
        head=2,
    ),
}


def random_job(rng: random.Random, mix: Mix) -> NewJob:
    checkpoint = rng.choice(mix.checkpoints)
    keys = [checkpoint, *rng.sample(mix.loras, rng.randint(0, len(mix.loras)))]
    rng.shuffle(keys)  # the class of a job does not depend on the order of its keys
    placement = Placement(
        checkpoint=checkpoint,
        model_keys=tuple(keys),
        work_units=rng.choice([1.0, 2.5, round(rng.uniform(0.1, 40.0), 6)]),
        group=rng.choice(mix.groups),
        eligible=rng.choice(mix.eligible),
    )
    number: float | None = None
    if rng.random() < mix.explicit_number:
        number = rng.choice([rng.randint(-5, 60), rng.randint(0, 60) + 0.5])
    return NewJob(
        job_id=str(uuid.uuid4()),
        prompt=PROMPT,
        extra_data={},
        client_id="c1",
        outputs=("9",),
        placement=placement,
        priority=rng.choice(mix.priorities),
        front=rng.random() < mix.front,
        number=number,
    )


Step = Callable[[JobStore, random.Random, Mix], Awaitable[None]]


async def enqueue(store: JobStore, rng: random.Random, mix: Mix) -> None:
    await store.enqueue(random_job(rng, mix))


async def restore(store: JobStore, rng: random.Random, mix: Mix) -> None:
    await store.restore(random_job(rng, mix), store.now_ms() - rng.randint(0, 9000), None)


async def claim(store: JobStore, rng: random.Random, mix: Mix) -> None:
    waiting = await store.pending_ids()
    if waiting:
        await store.claim(rng.choice(waiting), rng.choice(["w1", "w2"]))


async def cancel(store: JobStore, rng: random.Random, mix: Mix) -> None:
    waiting = await store.pending_ids()
    if waiting:
        assert await store.cancel_pending(rng.choice(waiting))


async def requeue(store: JobStore, rng: random.Random, mix: Mix) -> None:
    job = await _held(store, rng)
    if job is not None and job.worker is not None:
        failed = rng.random() < 0.5
        await store.requeue(
            job.job_id, job.worker, job.attempt, failed=failed, outcome="lost", give_up_entry={}
        )


async def finish_or_cancel_held(store: JobStore, rng: random.Random, mix: Mix) -> None:
    job = await _held(store, rng)
    if job is None or job.worker is None:
        return
    if rng.random() < 0.5:
        await store.cancel_held(job.job_id, job.worker, job.attempt)
    else:
        await store.finish(job.job_id, job.worker, job.attempt, JobState.SUCCESS, {})


async def reassert(store: JobStore, rng: random.Random, mix: Mix) -> None:
    """A held job as it is (nothing to do), or a waiting one whose claim Redis lost."""
    if rng.random() < 0.5:
        job = await _held(store, rng)
        if job is not None and job.worker is not None:
            assert await store.reassert_held(job.job_id, job.worker, job.attempt, job, None) == 2
        return
    waiting = await store.pending_ids()
    record = await store.get(rng.choice(waiting)) if waiting else None
    if record is not None:
        assert await store.reassert_held(record.job_id, "w3", record.attempt + 1, record, None)


async def clear(store: JobStore, rng: random.Random, mix: Mix) -> None:
    """POST /queue clear, as the farm does it."""
    for job_id in await store.pending_ids():
        await store.cancel_pending(job_id)


async def _held(store: JobStore, rng: random.Random) -> JobRecord | None:
    held = await store.held_ids()
    return await store.get(rng.choice(held)) if held else None


STEPS: list[tuple[Step, float]] = [
    (enqueue, 5.0),
    (restore, 0.7),
    (claim, 2.0),
    (cancel, 0.8),
    (requeue, 1.2),
    (finish_or_cancel_held, 0.8),
    (reassert, 1.0),
    (clear, 0.15),
]


def assert_same_groups(actual: tuple[JobGroup, ...], expected: tuple[JobGroup, ...]) -> None:
    assert [g.key for g in actual] == [g.key for g in expected]
    for got, want in zip(actual, expected, strict=True):
        assert got.head == want.head
        assert (got.count, got.top_priority, got.oldest_s, got.newest_s) == (
            want.count,
            want.top_priority,
            want.oldest_s,
            want.newest_s,
        )
        assert got.work_units == pytest.approx(want.work_units, rel=1e-9, abs=1e-6 * want.count)
        assert got.enqueued_s_sum == pytest.approx(want.enqueued_s_sum, rel=1e-12)


async def expected_groups(store: JobStore, head: int) -> tuple[JobGroup, ...]:
    return queue.group_jobs([job.job_view() for job in await store.peek(10**6)], head)


async def index_keys(redis_client: aioredis.Redis) -> set[str]:
    return {str(key) for key in await redis_client.keys("t:queue:*")}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_queue_groups_match_the_grouped_queue_after_every_transition(
    store: JobStore, clock: FakeClock, redis_client: aioredis.Redis, scenario: str, seed: int
) -> None:
    mix = SCENARIOS[scenario]
    rng = random.Random(f"{scenario}/{seed}")
    steps, weights = zip(*STEPS, strict=True)
    for _ in range(80):
        step = rng.choices(steps, weights)[0]
        await step(store, rng, mix)
        clock.advance(rng.uniform(0.0, 3.0))
        expected = await expected_groups(store, mix.head)
        assert_same_groups(await store.queue_groups(mix.head), expected)
        assert await store.index.in_step()
    await clear(store, rng, mix)
    assert await store.queue_groups(mix.head) == ()
    assert await index_keys(redis_client) == set(), "an emptied group left keys behind"


async def test_an_emptied_group_disappears_and_others_keep_their_sums(store: JobStore) -> None:
    rng = random.Random(7)
    a = [random_job(rng, Mix(checkpoints=("a.safetensors",))) for _ in range(3)]
    b = random_job(rng, Mix(checkpoints=("b.safetensors",)))
    for job in [*a, b]:
        await store.enqueue(job)
    await store.claim(b.job_id, "w1")
    groups = await store.queue_groups()
    assert [g.count for g in groups] == [3]
    assert groups[0].work_units == pytest.approx(sum(j.placement.work_units for j in a))


async def test_queue_groups_show_the_first_jobs_and_count_all_of_5000(
    store: JobStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    rng = random.Random(5000)
    mix = Mix(checkpoints=tuple(f"m{i}.safetensors" for i in range(7)), priorities=(0, 0, 1))
    for _ in range(5000):
        await store.enqueue(random_job(rng, mix))
        clock.advance(0.01)
    await redis_client.config_resetstat()
    groups = await store.queue_groups(head=16)
    stats = await redis_client.info("commandstats")
    assert_same_groups(groups, await expected_groups(store, 16))
    assert sum(g.count for g in groups) == 5000
    assert all(len(g.head) == 16 for g in groups)
    # Per group a range and one read of the shown jobs, and the same of its last job (its
    # arrival): the other 4,881 jobs are not touched.
    assert stats["cmdstat_zrange"]["calls"] == 2 * len(groups)
    assert stats["cmdstat_hmget"]["calls"] == len(groups)
    assert stats["cmdstat_hget"]["calls"] == 3 * len(groups)  # work, arrivals, the last job


async def test_head_must_show_a_job(store: JobStore) -> None:
    with pytest.raises(ValueError, match="at least one"):
        await store.queue_groups(head=0)


async def as_before_the_index(store: JobStore, redis_client: aioredis.Redis) -> None:
    """Redis as an older gateway left it: no index, and job records without group fields."""
    index = await index_keys(redis_client)
    await redis_client.delete(*index)
    for job_id in [*await store.pending_ids(), *await store.held_ids()]:
        await redis_client.hdel(store.keys.job(job_id), "queue_group", "class_key", "work_units")


async def test_the_farm_rebuilds_a_missing_index_at_start(
    store: JobStore,
    redis_client: aioredis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rng = random.Random(3)
    mix = SCENARIOS["loras, eligible sets and A/B groups"]
    for _ in range(40):
        await store.enqueue(random_job(rng, mix))
    held = [await store.claim(job_id, "w1") for job_id in (await store.pending_ids())[:5]]
    await as_before_the_index(store, redis_client)
    assert await store.queue_groups() == ()
    farm = bare_farm(store, redis_client)
    with caplog.at_level(logging.WARNING, logger="gateway.jobs.group_index"):
        await farm.start()
    try:
        assert "queue index rebuilt: 35 waiting jobs, 40 job records" in caplog.text
        assert_same_groups(await store.queue_groups(), await expected_groups(store, 64))
        # A held job has its group fields too: requeued, it is in the index again.
        job = held[0]
        assert job is not None
        await store.requeue(job.job_id, "w1", 1, failed=False, outcome="x", give_up_entry={})
        assert_same_groups(await store.queue_groups(), await expected_groups(store, 64))
        assert sum(g.count for g in await store.queue_groups()) == 36
    finally:
        await farm.stop()


async def test_an_index_in_step_is_left_alone(store: JobStore) -> None:
    await store.enqueue(random_job(random.Random(1), Mix()))
    assert not await store.index.ensure()


def bare_farm(store: JobStore, redis_client: aioredis.Redis) -> Farm:
    """A farm with no workers: what its start does to Redis, nothing else."""
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    return Farm(
        store,
        hub,
        Links([]),
        load_policy("affinity"),
        FarmCatalog(None),
        settings=FarmSettings(node="n1", lease_s=10.0, stall_timeout_s=60.0),
    )


async def test_a_rebuild_under_way_loses_no_job_that_arrives_or_leaves_meanwhile(
    store: JobStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    rng = random.Random(9)
    mix = SCENARIOS["priorities, front and explicit numbers"]
    for _ in range(1500):  # three batches and more: steps run between them
        await store.enqueue(random_job(rng, mix))
    for job_id in (await store.pending_ids())[:20]:
        await store.claim(job_id, "w1")
    await as_before_the_index(store, redis_client)

    async def meanwhile() -> None:
        steps, weights = zip(*STEPS[:-1], strict=True)  # all but clear
        for _ in range(60):
            await rng.choices(steps, weights)[0](store, rng, mix)
            clock.advance(0.5)

    await asyncio.gather(store.index.rebuild(), meanwhile())
    await store.index.ensure()
    assert await store.index.in_step()
    assert_same_groups(await store.queue_groups(), await expected_groups(store, 64))
