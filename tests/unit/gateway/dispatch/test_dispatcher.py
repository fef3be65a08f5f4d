"""The dispatcher's loop: woken or idle, a cancel always ends it (the gateway's stop awaits it)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace

import pytest
import redis.asyncio as aioredis
from pytest import MonkeyPatch

from bench.sim.engine import SimConfig
from gateway.app import load_policy
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.links import Held, Links, WorkerLink, WorkerState
from gateway.events.hub import Hub
from gateway.farm.catalog import FarmCatalog
from gateway.farm.node import Farm, FarmSettings
from gateway.jobs.models import Placement
from gateway.jobs.store import JobStore
from gateway.learning import learn as learning
from gateway.scheduler.cost import FIRST_USE_S
from gateway.scheduler.policy import ASK_EVERY_S
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot
from tests.unit.gateway.conftest import FakeClock
from tests.unit.gateway.jobs.test_store import new_job
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec
from workers.warmup.prompts import WarmupResult
from workers.warmup.run import WarmupError


@pytest.mark.parametrize("turns", range(6))
async def test_a_dispatcher_woken_just_before_it_is_cancelled_still_ends(
    store: JobStore, redis_client: aioredis.Redis, turns: int
) -> None:
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    dispatcher = Dispatcher(store, Links([]), load_policy("sticky"), hub, poll_s=30)
    task = asyncio.create_task(dispatcher.run())
    await asyncio.sleep(0)
    dispatcher.wake()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done, f"cancelled {turns} turns after a wake-up, the dispatcher kept running"


class SuspectGuard:
    """Redis may have restarted: a guard that has not repaired it yet."""

    def __init__(self) -> None:
        self.suspected = True

    async def ready(self) -> bool:
        return True

    def suspect(self) -> None:
        self.suspected = True


async def test_no_job_is_claimed_while_a_redis_restart_is_suspected(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    handle = WorkerHandle(WorkerSpec("w1"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s", state=WorkerState.READY)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    dispatcher = Dispatcher(store, Links([link]), load_policy("sticky"), hub)
    guard = SuspectGuard()
    dispatcher.guard = guard
    job = new_job()
    await store.enqueue(job)
    try:
        assert await dispatcher.dispatch_once() == 0
        assert await store.pending_ids() == [job.job_id]
        guard.suspected = False
        assert await dispatcher.dispatch_once() == 1
    finally:
        await dispatcher.stop()
        await link.client.aclose()


class FakeWarmUp:
    """Stands in for `workers.warmup.run.warm_up`: records its calls, ends when told."""

    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.calls: list[tuple[str, str]] = []
        self.release = asyncio.Event()

    async def __call__(self, client: ComfyClient, checkpoint: str) -> WarmupResult:
        self.calls.append((str(client.base_url), checkpoint))
        await self.release.wait()
        if self.fails:
            raise WarmupError(f"warm-up of {checkpoint} failed: refused")
        return WarmupResult(checkpoint, seconds=3.0, family="sd15")


CKPT = "sd15_a.safetensors"
PAUSE_S = 0.05
"""The dispatcher's `poll_s` here: a cold worker warms up once no job arrived for as long."""


async def round_after_arrivals_paused(dispatcher: Dispatcher, clock: FakeClock) -> None:
    clock.advance(PAUSE_S * 1.5)  # the store's clock, which arrivals are stamped on
    await dispatcher.dispatch_once()
    await asyncio.sleep(0.01)  # a warm-up task starts


async def warm_and_cold(
    store: JobStore, redis_client: aioredis.Redis, gpu: int | None
) -> tuple[list[WorkerLink], Dispatcher]:
    """w1 holds CKPT, w2 is cold (both on GPU `gpu`, unreachable); one job of CKPT waits. One
    slot each: while w2 warms up, the job (its send to w1 fails) cannot go there."""
    handles = [WorkerHandle(WorkerSpec(n, gpu=gpu), f"http://127.0.0.1:{p}", ready=True)
               for n, p in (("w1", 9), ("w2", 10))]  # fmt: skip
    links = [WorkerLink(h, ComfyClient(h.url), sid="s", state=WorkerState.READY) for h in handles]
    links[0].resident, links[1].cold = (CKPT,), True
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    policy = load_policy("affinity")
    dispatcher = Dispatcher(store, Links(links), policy, hub, capacity=1, poll_s=PAUSE_S)
    placement = Placement(checkpoint=CKPT, model_keys=(CKPT,))
    await store.enqueue(replace(new_job(), placement=placement))
    return links, dispatcher


@pytest.mark.parametrize("fails", [False, True])
async def test_a_cold_idle_worker_warms_up_busy_as_with_a_job_and_serves_whatever_the_outcome(
    store: JobStore, redis_client: aioredis.Redis, clock: FakeClock, fails: bool
) -> None:
    """A job of the checkpoint warm w1 holds is placed there; the cold w2, idle, warms up on
    it (no job arrived for `poll_s`). Meanwhile the policy sees w2 busy as with a job holding
    that checkpoint (a slot taken, its models resident), not gone; after it, warm or not, w2
    takes jobs again."""
    links, dispatcher = await warm_and_cold(store, redis_client, gpu=None)
    w2 = links[1]
    warm = dispatcher.warm_up = FakeWarmUp(fails)
    try:
        await round_after_arrivals_paused(dispatcher, clock)
        assert warm.calls == [(w2.url, CKPT)], "w1 got the job: only w2 was cold and idle"
        assert w2.warming is not None
        (view,) = [v for v in dispatcher.lanes() if v.name == "w2"]
        assert (view.outstanding, view.free_slots, view.resident) == (1, 0, (CKPT,))
        assert_pays_first_use(dispatcher, w2)
        (waiting,) = await store.peek(1)  # a job sent behind the warm-up (capacity 2)
        w2.hold(waiting.job_id, Held(1, None, record=waiting))
        assert_pays_first_use(dispatcher, w2, waiting.job_view())
        w2.release(waiting.job_id)
        await dispatcher.dispatch_once()
        assert len(warm.calls) == 1, "one warm-up at a time"
        warm.release.set()
        for _ in range(100):
            if w2.warming is None:
                break
            await asyncio.sleep(0.01)
        assert w2.warming is None and w2.accepting and w2.free_slots(1) == 1
        assert not w2.cold, "a worker warms up once, whatever the outcome"
        assert w2.last_warm_up is not None and w2.last_warm_up["ok"] is (not fails)
        assert w2.resident == (() if fails else (CKPT,))
    finally:
        await dispatcher.stop()
        for link in links:
            await link.client.aclose()


def assert_pays_first_use(dispatcher: Dispatcher, link: WorkerLink, *queued: JobView) -> None:
    """The policy sees the warming worker's seconds left as the warm-up, the card's first use
    included, then `queued`: as the simulator shows a warming worker."""
    assert link.warming is not None
    (view,) = [v for v in dispatcher.lanes() if v.name == link.name]
    base = replace(
        dispatcher.estimates.of(link), resident=link.resident, cache_slots=link.cache_slots
    )
    elapsed_s = dispatcher.clock() - link.warming_since_s
    held = [(link.warming, elapsed_s), *((job, 0.0) for job in queued)]
    warm_s = learning.outstanding_s(base, held)
    assert view.outstanding_s == pytest.approx(warm_s + FIRST_USE_S, abs=0.1)


async def test_a_cold_idle_worker_warms_up_only_once_arrivals_have_paused(
    store: JobStore, redis_client: aioredis.Redis, clock: FakeClock, monkeypatch: MonkeyPatch
) -> None:
    """A client posts a burst one prompt at a time: a warm-up chosen on its first prompt alone
    would hold w2, on that prompt's checkpoint, from the burst's next jobs. So w2 warms up
    only once no job has arrived for `poll_s`, as the simulator's cold workers do a tick
    after the last arrival."""
    links, dispatcher = await warm_and_cold(store, redis_client, gpu=None)
    w1, w2 = links

    async def accepted(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(w1.client, "submit", accepted)
    warm = dispatcher.warm_up = FakeWarmUp(fails=False)
    try:
        await dispatcher.dispatch_once()
        await asyncio.sleep(0.01)
        assert len(w1.held) == 1, "the job went to w1, which holds its checkpoint"
        assert warm.calls == [] and w2.cold, "the job has just arrived: more may follow"
        clock.advance(PAUSE_S / 2)
        await dispatcher.dispatch_once()
        await asyncio.sleep(0.01)
        assert warm.calls == [], "half the pause"
        await round_after_arrivals_paused(dispatcher, clock)
        assert warm.calls == [(w2.url, CKPT)]
    finally:
        warm.release.set()
        await dispatcher.stop()
        for link in links:
            await link.client.aclose()


async def test_a_cold_worker_that_shares_its_card_is_not_warmed_up(
    store: JobStore, redis_client: aioredis.Redis, clock: FakeClock
) -> None:
    """Two instances on one GPU: the warm-up's load would run beside the other's job (on a real
    H100 it made that job's load 10x slower), so the cold one pays its first use on a job."""
    links, dispatcher = await warm_and_cold(store, redis_client, gpu=0)
    w2 = links[1]
    warm = dispatcher.warm_up = FakeWarmUp(fails=False)
    try:
        await dispatcher.dispatch_once()
        await round_after_arrivals_paused(dispatcher, clock)
        assert warm.calls == [] and w2.warming is None and w2.cold
    finally:
        await dispatcher.stop()
        for link in links:
            await link.client.aclose()


async def test_a_cold_workers_first_job_is_believed_to_pay_the_cards_first_use(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    """As the simulator shows it: the job sent to a cold worker (no warm-up ahead of it) is
    believed to take the card's first use longer than the same job on a warm one, although the
    worker stops being cold once it holds a job. Idle, the cold worker is not priced with it
    (`learning.outstanding_s` says why)."""
    links, dispatcher = await warm_and_cold(store, redis_client, gpu=0)
    w2 = links[1]
    try:
        (view,) = [v for v in dispatcher.lanes() if v.name == "w2"]
        assert w2.cold and view.outstanding_s == 0.0
        (waiting,) = await store.peek(1)

        def seconds_left(first_use: bool) -> float:
            w2.hold(waiting.job_id, Held(1, None, record=waiting, first_use=first_use))
            (view,) = [v for v in dispatcher.lanes() if v.name == "w2"]
            w2.release(waiting.job_id)
            return view.outstanding_s

        first_s, warm_s = seconds_left(first_use=True), seconds_left(first_use=False)
        assert not w2.cold
        assert warm_s > 0 and first_s == pytest.approx(warm_s + FIRST_USE_S)
    finally:
        await dispatcher.stop()
        for link in links:
            await link.client.aclose()


@pytest.mark.parametrize(
    ("time_scale", "poll_s"), [(1.0, 0.25), (0.25, 0.0625), (0.1, 0.025), (0.001, 0.02)]
)
async def test_the_dispatcher_polls_in_the_seconds_of_the_cards_as_the_simulator_ticks(
    store: JobStore, redis_client: aioredis.Redis, time_scale: float, poll_s: float
) -> None:
    """A fixed 0.25 s of wall time was 2.5 s of the cards at time scale 0.1: a job held back
    for a busy holder was looked at again that late once its clock ran out. Never more often
    than `MIN_WALL_S`."""
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    settings = FarmSettings(node="n1", lease_s=10.0, stall_timeout_s=60.0, time_scale=time_scale)
    policy = load_policy("affinity")
    farm = Farm(store, hub, Links([]), policy, FarmCatalog(None), settings=settings)
    assert farm.dispatcher.poll_s == pytest.approx(poll_s)
    assert SimConfig().tick_s == ASK_EVERY_S


@dataclass(frozen=True)
class HoldBack:
    """A policy that leaves every job waiting (as one waiting for a busy holder does)."""

    name: str = "hold_back"

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        return []


@pytest.mark.parametrize("waiting", [True, False])
async def test_the_dispatcher_polls_fast_only_while_jobs_wait_beside_a_worker_with_room(
    store: JobStore, redis_client: aioredis.Redis, waiting: bool
) -> None:
    handle = WorkerHandle(WorkerSpec("w1"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s", state=WorkerState.READY)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    dispatcher = Dispatcher(store, Links([link]), HoldBack(), hub, poll_s=0.02)
    if waiting:
        await store.enqueue(new_job())
    task = asyncio.create_task(dispatcher.run())
    try:
        await asyncio.sleep(0.6)
        rounds = dispatcher.rounds
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=2)
        await link.client.aclose()
    if waiting:
        assert rounds >= 8  # about 30 at 0.02 s; 3 at ASK_EVERY_S
    else:
        assert rounds <= 4  # every ASK_EVERY_S: nothing to look at again


@dataclass
class Shown:
    """A policy that places nothing and records, for each ask, how many jobs it was shown
    and when (by the wall clock)."""

    name: str = "shown"
    asks: list[tuple[float, int]] = field(default_factory=list)

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        self.asks.append((time.monotonic(), len(snapshot.jobs)))
        return []


async def posted_while_running(
    store: JobStore,
    redis_client: aioredis.Redis,
    settle: tuple[float, float],
    jobs: tuple[int, float],
    after_s: float = 0.0,
) -> tuple[float, list[tuple[float, int]]]:
    """A running dispatcher settling for `settle` (pause, cap) seconds, one free worker and a
    policy that places nothing; `jobs` (count, gap) accepted as `POST /prompt` accepts them,
    then `after_s` more. When the first was accepted, and the policy's asks."""
    handle = WorkerHandle(WorkerSpec("w1"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s", state=WorkerState.READY)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    policy = Shown()
    dispatcher = Dispatcher(store, Links([link]), policy, hub, poll_s=30)
    dispatcher.settle_s, dispatcher.settle_cap_s = settle
    task = asyncio.create_task(dispatcher.run())
    try:
        await asyncio.sleep(0)
        first_s = time.monotonic()
        count, gap_s = jobs
        for i in range(count):
            if i:
                await asyncio.sleep(gap_s)
            await store.enqueue(new_job())
            dispatcher.arrived()
        await asyncio.sleep(after_s)
    finally:
        task.cancel()
        await asyncio.wait({task}, timeout=2)
        await link.client.aclose()
    return first_s, policy.asks


@pytest.mark.parametrize(("count", "gap_s"), [(4, 0.01), (1, 0.0)])
async def test_a_burst_posted_one_prompt_at_a_time_is_shown_to_the_policy_whole(
    store: JobStore, redis_client: aioredis.Redis, count: int, gap_s: float
) -> None:
    """`gateway.scheduler.settle`: the dispatcher asks the policy once arrivals pause, so the
    first ask shows every job of the burst; a lone job is asked about `settle_s` after it."""
    first_s, asks = await posted_while_running(
        store, redis_client, (0.2, 1.0), (count, gap_s), after_s=0.4
    )
    asked_s, shown = asks[0]
    assert shown == count
    assert asked_s - first_s >= 0.2 + (count - 1) * gap_s


async def test_a_stream_of_prompts_is_shown_to_the_policy_within_the_settling_cap(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    """However fast prompts keep arriving, the policy is asked `settle_cap_s` after the first
    of them, not once they stop (24 prompts 0.05 s apart: 1.15 s of arrivals)."""
    first_s, asks = await posted_while_running(store, redis_client, (0.2, 0.3), (24, 0.05))
    asked_s, shown = asks[0]
    assert asked_s - first_s >= 0.3
    assert shown < 24, "the first ask waited for the stream to end"
