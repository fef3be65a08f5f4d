"""One trace, two builders of what the policy sees: the gateway's (the Redis group index) and
the simulator's (`queue.QueueIndex`), both through `queue.snapshot_of`. The assignments must be
the same, so the simulator cannot drift from the dispatcher."""

from __future__ import annotations

import random
import uuid

import gateway.scheduler  # noqa: F401  (registers the policies)
from gateway.jobs.models import NewJob, Placement
from gateway.jobs.store import JobStore
from gateway.scheduler import queue
from gateway.scheduler.policy import make_policy
from gateway.scheduler.snapshot import Assignment, WorkerView
from tests.unit.gateway.jobs.test_store import PROMPT

CHECKPOINTS = ("a.safetensors", "b.safetensors", "sdxl_c.safetensors", "sdxl_d.safetensors")


def farm() -> tuple[WorkerView, ...]:
    def one(name: str, resident: str, speed: float, busy_s: float) -> WorkerView:
        return WorkerView(
            name=name,
            free_slots=1 if busy_s else 2,
            outstanding=1 if busy_s else 0,
            outstanding_s=busy_s,
            resident=(resident,),
            speed={"sd15": speed, "sdxl": speed / 2},
            load_s={"sd15": 3.0, "sdxl": 6.0},
            idle_since_s=None if busy_s else 0.0,
        )

    return (one("w1", CHECKPOINTS[0], 20.0, 0.0), one("w2", CHECKPOINTS[2], 8.0, 4.0))


def new_job(rng: random.Random) -> NewJob:
    checkpoint = rng.choice(CHECKPOINTS)
    placement = Placement(
        checkpoint=checkpoint, model_keys=(checkpoint,), work_units=rng.choice([5.0, 20.0])
    )
    return NewJob(
        job_id=str(uuid.uuid4()),
        prompt=PROMPT,
        extra_data={},
        client_id="c",
        outputs=("9",),
        placement=placement,
        priority=rng.choice([0, 0, 0, 1]),
    )


async def test_the_gateway_and_the_simulator_see_one_queue_and_place_alike(
    store: JobStore,
) -> None:
    rng = random.Random(7)
    index = queue.QueueIndex()
    policy = make_policy("affinity")
    for step in range(40):
        job = new_job(rng)
        await store.enqueue(job)
        record = await store.get(job.job_id)
        assert record is not None
        index.add(record.job_view())
        if step % 8 != 7:
            continue
        now_s = store.clock()
        in_redis = await store.queue_groups()
        in_memory = index.groups()
        assert [g.key for g in in_redis] == [g.key for g in in_memory]
        gateway_sees = queue.snapshot_of(now_s, in_redis, farm(), {})
        simulator_sees = queue.snapshot_of(now_s, in_memory, farm(), {})
        placed = policy.assign(gateway_sees)
        assert _plain(placed) == _plain(policy.assign(simulator_sees))
        assert placed, "a farm with free slots placed nothing"
        for assignment in placed:  # both take the jobs the policy chose
            assert await store.claim(assignment.job_id, assignment.worker) is not None
            assert index.remove(assignment.job_id) is not None


def _plain(assignments: list[Assignment]) -> list[tuple[str, str]]:
    return [(a.job_id, a.worker) for a in assignments]
