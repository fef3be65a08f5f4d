"""Late binding: when a worker of this node has a free slot, give it the next job.

(The early-binding baselines get a slot per job, so each job goes to its worker on arrival.)

The mechanics live here: take a snapshot of the waiting jobs and the free workers, ask the
pure placement policy, claim each chosen job atomically in Redis (another node may have
taken it), and send it. The policy never sees Redis or HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Protocol

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway import tasks
from gateway.dispatch.estimated import FarmEstimates
from gateway.dispatch.links import Held, Links, WorkerLink, WorkerState
from gateway.dispatch.outcomes import Outcomes
from gateway.events.hub import Hub
from gateway.jobs.models import JobRecord
from gateway.jobs.store import JobStore
from gateway.learning import learn as learning
from gateway.learning.demand import rates_at
from gateway.metrics.recorded import Metrics
from gateway.peers.lanes import farm_lanes
from gateway.scheduler import cost, queue, settle, takeback
from gateway.scheduler.policy import (
    ASK_EVERY_S,
    Policy,
    Stepwise,
    binds_early,
    slots_per_worker,
)
from gateway.scheduler.snapshot import Assignment, Snapshot, WorkerView
from gateway.scheduler.warming import warm_up_job, warm_ups
from workers.client import (
    ComfyClient,
    WorkerError,
    WorkerNoAnswer,
    WorkerRejected,
    WorkerUnreachable,
)
from workers.warmup.prompts import WarmupResult

log = logging.getLogger(__name__)

WarmUp = Callable[[ComfyClient, str], Awaitable[WarmupResult]]
"""Runs the warm-up of a checkpoint on a worker (`workers.warmup.run.warm_up`)."""

REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)
OFF_LOOP_AT = 256
"""Groups x workers from which a decision is made in steps or on a thread (a few hundred
microseconds below it: not worth a pause)."""
STEP_S = 0.0005
"""How long a stepwise decision runs before the event loop is served again. The loop waits at
most this plus one step (1.5 ms at 100,000 jobs x 256 workers x 256 models) and a timer that
fell due meanwhile; at 1 ms the longest gap between 1 ms ticks in that burst was 5.0-5.1 ms,
at 0.5 ms 3.7-4.2 ms for 2 % more decision time (`python -m bench.looplag`)."""


class Guard(Protocol):
    """Says whether Redis may be used for a round
    (`gateway.recovery.redis_repair.RedisRestarts`)."""

    async def ready(self) -> bool: ...

    @property
    def suspected(self) -> bool: ...

    def suspect(self) -> None: ...


class Dispatcher:
    def __init__(
        self,
        store: JobStore,
        links: Links,
        policy: Policy,
        hub: Hub,
        *,
        capacity: int = 2,
        poll_s: float = ASK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
    ):
        self.store = store
        self.links = links
        self.policy = policy
        self.hub = hub
        self.capacity = slots_per_worker(policy, capacity)
        """Jobs one worker may hold: running + prefetched, or no limit for an early binder."""
        self.poll_s = poll_s
        self.clock = clock
        self.settle_s = settle.SETTLE_S
        self.settle_cap_s = settle.SETTLE_CAP_S
        """How long arrivals settle before a round (`gateway.scheduler.settle`), wall seconds."""
        self._settling: settle.Settling | None = None
        """Jobs arrived (by the wall clock) that no round has looked at yet (`arrived`)."""
        self.outcomes = Outcomes(store, hub, self.wake, metrics, twins=links.twins)
        self._wake = asyncio.Event()
        self._sends: set[asyncio.Task[None]] = set()
        self._round = asyncio.Lock()
        self._arrivals = learning.Arrivals()
        self._kept: set[tuple[str, int]] = set()
        """(job, attempt) a holder did not give back when asked (it had started it): not
        asked again."""
        self._look_again_soon = False
        """The last round left something to look at again after `poll_s`, not `ASK_EVERY_S`:
        jobs waiting while a worker had room (the policy may have held some back for a busy
        holder), or a cold worker's warm-up waiting for arrivals to pause."""
        self._newest_arrival_s: float | None = None
        """When the newest job seen waiting arrived (the store's clock)."""
        self.rounds = 0
        """Rounds run so far: what a test waits on to know the dispatcher has looked again."""
        self.estimates = FarmEstimates(links)
        """What is believed of each worker's speeds and loads, estimates included."""
        self.guard: Guard | None = None
        """Asked before each round of `run`: none while Redis is down or being repaired."""
        self.remote_lanes: Callable[[], tuple[WorkerView, ...]] = tuple
        """The other nodes' workers (`gateway.peers`): lanes the policy counts, that this node
        never assigns to. A job the policy gives to one is left for its node to claim."""
        self.standing: Callable[[], bool] = lambda: True
        """False while this node may have lapsed from the farm: no claims meanwhile."""
        self.warm_up: WarmUp | None = None
        """Warms a cold worker left idle (`gateway.scheduler.warming`); None: none is."""

    def wake(self) -> None:
        self._wake.set()

    def arrived(self) -> None:
        """A job was accepted: the next round runs once arrivals pause
        (`gateway.scheduler.settle`), so a burst posted one prompt at a time is placed whole."""
        self._settling = settle.arrived(self._settling, time.monotonic())
        self._wake.set()

    async def _settle(self) -> None:
        """Until the arrivals no round has looked at have paused (at most the cap), by the
        wall clock, whatever clock the dispatcher keeps."""
        while self._settling is not None:
            left_s = self._settling.until_s(self.settle_s, self.settle_cap_s) - time.monotonic()
            if left_s <= 0:
                break
            await asyncio.sleep(left_s)
        self._settling = None

    async def run(self) -> None:
        """Dispatch whenever woken (a new job, a freed slot), at least every `poll_s` while
        jobs wait and a worker has room (as the simulator ticks), else every `ASK_EVERY_S`;
        a round after new jobs waits for their arrivals to settle (`_settle`)."""
        while True:
            tasks.check_cancelled()
            with contextlib.suppress(TimeoutError):
                # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that arrives with
                # a wake-up, and stopping the gateway would then wait for this loop forever.
                idle_s = self.poll_s if self._look_again_soon else max(self.poll_s, ASK_EVERY_S)
                async with asyncio.timeout(idle_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                if self.guard is not None and not await self.guard.ready():
                    await asyncio.sleep(self.poll_s)
                    continue
                await self._settle()
                await self.dispatch_once()
            except Exception as exc:
                if self.guard is not None and isinstance(exc, REDIS_DOWN):
                    self.guard.suspect()
                log.exception("dispatch round failed")
                await asyncio.sleep(self.poll_s)

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No round runs meanwhile (one under way finishes first, its claims made)."""
        async with self._round:
            yield

    async def place_now(self, timeout_s: float = 10.0) -> None:
        """One round now, its sends delivered before returning. For a prompt that may overtake
        one already sent ahead to a worker: it must be there before its client hears back, or
        an interrupt sent right after could let the overtaken prompt start first."""
        before = set(self._sends)
        await self.dispatch_once()
        sent = self._sends - before
        if sent:
            await asyncio.wait(sent, timeout=timeout_s)

    async def dispatch_once(self) -> int:
        """One round: returns how many jobs were claimed."""
        async with self._round:
            claimed = await self._dispatch_round()
            self.rounds += 1
            return claimed

    async def _dispatch_round(self) -> int:
        free = [link for link in self.links if link.free_slots(self.capacity) > 0]
        self._look_again_soon = False
        if not free:
            return await self._jump_the_queue()
        claimed = await self._place_waiting()
        if not binds_early(self.policy):  # a proxy in front of ComfyUI moves nothing once sent
            claimed += await self._take_back_for_idle()
        self._warm_cold()
        return claimed

    async def _place_waiting(self) -> int:
        """The policy's choice among the waiting jobs, claimed and sent; how many."""
        read_at_ms = self.store.now_ms()
        groups = await self.store.queue_groups(self._head_jobs())
        if not groups:
            return 0
        self._look_again_soon = True
        newest_s = max(group.newest_s for group in groups)
        self._newest_arrival_s = max(newest_s, self._newest_arrival_s or newest_s)
        now_s = self.store.clock()
        # Busy workers too (no free slots), as in the simulator: a policy may leave a job to a
        # worker that frees soon rather than load it elsewhere.
        workers = farm_lanes(self.lanes(), self._farm_lanes())
        snapshot = queue.snapshot_of(now_s, groups, workers, {})
        # At most half of what `arrived` remembers: a job it forgot would count again.
        shown = snapshot.jobs[: learning.SEEN_LIMIT // 2]
        self._arrivals = learning.arrived(self._arrivals, shown)
        snapshot = replace(snapshot, demand_per_s=rates_at(self._arrivals.meter, now_s))
        claimed = 0
        async with contextlib.aclosing(decisions(self.policy, snapshot)) as made:
            async for assignment in made:
                claimed += await self._claim_and_send(assignment, chosen_at_ms=read_at_ms)
        return claimed

    def _head_jobs(self) -> int:
        """Jobs shown per group: as many as the free slots of the whole farm could take in one
        round (at least 8, at most `queue.HEAD_JOBS`); the rest count in the aggregates."""
        slots = sum(link.free_slots(self.capacity) for link in self.links)
        slots += sum(view.free_slots for view in self._farm_lanes())
        return min(max(slots, 8), queue.HEAD_JOBS)

    def lanes(self) -> tuple[WorkerView, ...]:
        """This node's accepting workers as the policy sees them."""
        return tuple(self._view(link) for link in self.links.accepting())

    def _farm_lanes(self) -> tuple[WorkerView, ...]:
        """The other nodes' lanes, for a policy that binds late (an early binder's choice
        depends on its own history, which other nodes do not share)."""
        return () if binds_early(self.policy) else self.remote_lanes()

    def _view(self, link: WorkerLink) -> WorkerView:
        """The worker as the policy sees it, as the simulator builds it: what it learned
        (speed, fixed and load seconds, residency), estimates of what it never measured from
        what is known of it and of the farm (`gateway.dispatch.estimated`), and what it holds."""
        held = [(h.record.job_view(), self._elapsed_s(h)) for h in link.held.values() if h.record]
        if link.warming is not None:  # the gateway's own job, before any sent since
            held.insert(0, (link.warming, max(self.clock() - link.warming_since_s, 0.0)))
        view = replace(
            self.estimates.of(link),
            group=link.group,
            free_slots=link.free_slots(self.capacity),
            outstanding=len(link.held) + (link.warming is not None),
            resident=link.resident,
            last_checkpoint=link.last_checkpoint,
            idle_since_s=self._on_store_clock(link.idle_since_s),
            cache_slots=link.cache_slots,
            queued=tuple(cost.models_of(job) for job, elapsed in held if elapsed is None),
            vram_free_mib=link.vram[0] if link.vram else None,
            vram_total_mib=link.vram[1] if link.vram else None,
        )
        ordered = sorted(held, key=lambda item: item[1] is None)
        spent = [(job, elapsed or 0.0) for job, elapsed in ordered]
        # What it holds once the jobs it started have loaded: a started job's models are in
        # VRAM (or on their way) although it is learned only when it ends, as in the simulator.
        resident = link.resident
        for job, elapsed in held:
            if elapsed is not None:
                resident = cost.touch(resident, cost.models_of(job), link.cache_slots)
        # Cold: it has run nothing yet. What pays the card's first use comes first in `spent`:
        # its warm-up (a warm-up runs only on a cold worker; `hold` clears `cold`, so a job sent
        # behind it would hide it), else the job sent while it was cold (`Held.first_use`).
        cold = link.cold or link.warming is not None or any(h.first_use for h in link.held.values())
        left_s = learning.outstanding_s(view, spent, cold=cold)
        return replace(view, outstanding_s=left_s, resident=resident)

    def _on_store_clock(self, at_s: float | None) -> float | None:
        """An instant of this node's clock (`clock`) on the store's clock, which snapshots use;
        None (never used) stays None."""
        if at_s is None:
            return None
        return self.store.clock() - max(self.clock() - at_s, 0.0)

    def _elapsed_s(self, held: Held) -> float | None:
        """Seconds it has run (None: not started)."""
        if held.clock is None:
            return None
        return max(self.clock() - held.clock.started_s, 0.0)

    async def _jump_the_queue(self) -> int:
        """Every worker is full, but a job that arrived later outranks (front, priority, a
        lower number) one prefetched on a worker and not started: send it to that worker too.
        Workers get the gateway's queue order as their `number`, so it runs first there, as a
        `front` prompt does on one ComfyUI."""
        prefetched = [
            (link, held.record, held.chosen_at_ms)
            for link in self.links.ready()
            for job_id, held in link.held.items()
            if job_id != link.running and held.started_at_ms is None and held.record is not None
        ]
        if not prefetched:
            return 0
        head = await self.store.peek(1)
        for link, record, chosen_at_ms in prefetched:
            if head and overtakes(head[0], record, chosen_at_ms) and _may_run(head[0], link):
                return await self._claim_and_send(Assignment(head[0].job_id, link.name), jump=True)
        return 0

    async def _claim_and_send(
        self, assignment: Assignment, *, jump: bool = False, chosen_at_ms: int | None = None
    ) -> int:
        link = self.links.get(assignment.worker)
        if link is None or (link.free_slots(self.capacity) <= 0 and not jump):
            return 0
        if self.guard is not None and self.guard.suspected:
            return 0  # Redis may have restarted and lost claims: repair it first
        if not self.standing():
            return 0  # the other nodes may be taking over this node's jobs
        why = assignment.why.as_dict() if assignment.why else None
        job = await self.store.claim(assignment.job_id, link.name, why)
        if job is None:
            return 0
        if why is not None:
            link.last_placement = {"job_id": job.job_id, **why}
        held = Held(
            job.attempt,
            job.client_id,
            job.placement.checkpoint,
            job.placement.model_keys,
            record=job,
            sid=link.sid,
            first_use=link.cold and link.warming is None,  # else its warm-up, ahead, pays it
            chosen_at_ms=chosen_at_ms,
        )
        link.hold(job.job_id, held)
        task = asyncio.create_task(self._send(link, job, held), name=f"send-{job.job_id}")
        self._sends.add(task)
        task.add_done_callback(self._send_done)
        return 1

    def _send_done(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    async def _send(self, link: WorkerLink, job: JobRecord, held: Held) -> None:
        """Send a claimed job to its worker. Every way this can end leaves the job settled or
        known to be unsettled: sent; refused, or impossible to send, ending the job with an
        error in its history; back in the queue when the worker was unreachable; held for the
        lease sweep to ask the worker when the answer was lost."""
        try:
            targets = json.loads(job.targets_json) if job.targets_json else None
            await link.client.submit(
                job.job_id,
                json.loads(job.prompt_json),
                client_id=held.sid or link.sid,
                extra_data=json.loads(job.extra_json),
                partial_execution_targets=targets,
                number=job.score,
            )
            log.debug("job %s sent to %s attempt %d", job.job_id, link.name, held.attempt)
        except WorkerRejected as exc:
            await self.outcomes.fail(link, job, held, f"worker {link.name} refused: {exc.body}")
        except WorkerUnreachable as exc:
            log.warning(
                "worker %s unreachable, job %s back to the queue: %s", link.name, job.job_id, exc
            )
            link.state = WorkerState.LOST
            fenced = job.with_attempt(held.attempt)
            await self.outcomes.requeue(
                link.name, fenced, failed=False, outcome="unsent", link=link
            )
        except WorkerNoAnswer as exc:
            # Unknown whether it arrived: the lease sweep will ask the worker.
            log.warning("job %s: no answer from %s: %s", job.job_id, link.name, exc)
        except Exception as exc:
            await self._unsendable(link, job, held, exc)

    async def _unsendable(
        self, link: WorkerLink, job: JobRecord, held: Held, exc: Exception
    ) -> None:
        # Nothing reached the worker (the request could not be built: a value JSON cannot
        # carry, a stored field that does not parse) and a retry would fail the same way.
        # Held, the job would keep its slot and have its lease renewed forever.
        log.error("job %s cannot be sent to %s: %r", job.job_id, link.name, exc)
        message = f"the gateway could not send this prompt to a worker: {exc!r}"
        await self.outcomes.fail(link, job, held, message, exception_type="GatewaySendError")

    async def _take_back_for_idle(self) -> int:
        """A worker is idle while another holds a job prefetched behind a long one: move the
        job where `takeback` says it finishes sooner, if its holder gives it back; how many."""
        queued = self._prefetched()
        if not queued or not any(not link.held and link.accepting for link in self.links):
            return 0
        views = [self._view(link) for link in self.links.ready()]
        jobs = {name: [record.job_view() for record in records] for name, records in queued.items()}
        moved = 0
        for move in takeback.take_backs(views, jobs):
            moved += await self._take_back(move)
        return moved

    def _prefetched(self) -> dict[str, list[JobRecord]]:
        """By worker, the jobs it has received and not started, in the order it runs them
        (by the `number` they were sent with)."""
        out: dict[str, list[JobRecord]] = {}
        every: set[tuple[str, int]] = set()
        for link in self.links.ready():
            for job_id, held in link.held.items():
                every.add((job_id, held.attempt))
                if held.record is not None and self._movable(link, job_id, held):
                    out.setdefault(link.name, []).append(held.record)
        self._kept &= every
        return {name: sorted(records, key=lambda r: r.score) for name, records in out.items()}

    def _movable(self, link: WorkerLink, job_id: str, held: Held) -> bool:
        """Not started, not ended, not given up on, and its send answered (a prompt still on
        its way could arrive after the worker said it has none)."""
        started = job_id == link.running or held.started_at_ms is not None
        started = started or held.clock is not None
        sending = any(task.get_name() == f"send-{job_id}" for task in self._sends)
        kept = (job_id, held.attempt) in self._kept
        return not (started or sending or kept or held.ended or held.abandoned)

    async def _take_back(self, move: takeback.TakeBack) -> int:
        """Withdraw the job from its holder and send it to the idle worker, requeued in
        between (fenced by its attempt, no failure counted); 0 when the holder kept it."""
        holder = self.links.get(move.holder)
        held = holder.held.get(move.job_id) if holder else None
        if holder is None or held is None or held.record is None:
            return 0
        if not await withdrawn(holder.client, move.job_id):
            self._kept.add((move.job_id, held.attempt))
            return 0
        if holder.held.get(move.job_id) is not held:
            return 0  # it ended meanwhile
        fenced = held.record.with_attempt(held.attempt)
        outcome = f"taken back for {move.worker}"
        requeued = await self.outcomes.requeue(
            holder.name, fenced, failed=False, outcome=outcome, link=holder
        )
        if requeued != 1:
            return 0
        log.info(
            "job %s taken back from %s for idle %s (expected %.1f s sooner)",
            move.job_id,
            holder.name,
            move.worker,
            move.gain_s,
        )
        return await self._claim_and_send(Assignment(move.job_id, move.worker, move.why))

    def _warm_cold(self) -> None:
        """Each cold worker left idle warms up on a checkpoint clients asked for
        (`gateway.scheduler.warming`); jobs sent to it meanwhile queue behind the warm-up. Only
        once no job has arrived for `poll_s` (`ASK_EVERY_S` of the cards): a client posts a
        burst one prompt at a time, and a warm-up chosen on its first prompt alone would hold
        the worker, on that prompt's checkpoint, from the burst's other jobs (as the simulator,
        which sees a burst arrive at one instant). Not one that shares its card with another
        worker: there the warm-up's load ran beside the other's first job and made that job's
        load 10x slower (two ComfyUI instances on one H100: 4.3-4.6 s against 0.3-0.5,
        `bench/data/real_gpu/h100-run20.json`), for 1 s that the warm-up saved the cold one."""
        if self.warm_up is None or not self._arrivals.latest:
            return
        cold = [
            link
            for link in self.links.accepting()
            if link.cold
            and not link.held
            and link.warming is None
            and not self.links.share_a_card(link)
        ]
        if not cold:
            return
        newest_s = self._newest_arrival_s
        if newest_s is not None and self.store.clock() - newest_s < self.poll_s:
            self._look_again_soon = True  # once arrivals have paused
            return
        lanes = {view.name: view for view in self.lanes()}
        rates = rates_at(self._arrivals.meter, self.store.clock())
        farm = farm_lanes(tuple(lanes.values()), self._farm_lanes())
        chosen = warm_ups([lanes[link.name] for link in cold], farm, self._arrivals.latest, rates)
        for name, checkpoint in chosen:
            link = self.links.get(name)
            assert link is not None
            link.warming = warm_up_job(self._arrivals.latest[checkpoint], self.store.clock())
            link.warming_since_s, link.idle_since_s = self.clock(), None
            task = asyncio.create_task(self._warm(link, checkpoint), name=f"warm-{name}")
            self._sends.add(task)
            task.add_done_callback(self._send_done)

    async def _warm(self, link: WorkerLink, checkpoint: str) -> None:
        assert self.warm_up is not None
        log.info("worker %s is cold and idle: warming up on %s", link.name, checkpoint)
        record: dict[str, object] = {"checkpoint": checkpoint, "started_ms": self.store.now_ms()}
        link.last_warm_up = {**record, "ended_ms": None, "ok": None}
        ok = False
        try:
            result = await self.warm_up(link.client, checkpoint)
        except Exception as exc:  # a failed warm-up leaves a worker that still runs jobs
            log.warning("worker %s: warm-up on %s failed (%s)", link.name, checkpoint, exc)
        else:
            link.warmed((result,))
            ok = True
            log.info("worker %s warmed up on %s in %.2fs", link.name, checkpoint, result.seconds)
        finally:
            link.last_warm_up = {**record, "ended_ms": self.store.now_ms(), "ok": ok}
            link.cold, link.warming = False, None
            if not link.held:
                link.idle_since_s = self.clock()
            self.wake()

    async def stop(self) -> None:
        await tasks.stop(self._sends)


async def decisions(policy: Policy, snapshot: Snapshot) -> AsyncGenerator[Assignment, None]:
    """The policy's assignments, each as soon as it is made (the dispatcher claims and sends
    it before the next is made, so a job waits for the decisions before it, not for the
    whole call), without holding the event loop (every client's requests and sockets) for
    long: a small decision at once; a large one in the policy's steps with the loop served
    whenever `STEP_S` has passed, or on a thread for a policy that has no steps (pure Python
    holds the GIL, handed back every `sys.getswitchinterval()`), with the garbage
    collector's passes deferred until it ends (close it, `contextlib.aclosing`, if not read
    to the end). `bench.looplag` measures the loop's longest gap during one,
    `bench.decision` the CPU time of each call and of each assignment."""
    if not is_large(snapshot):
        for assignment in policy.assign(snapshot):
            yield assignment
        return
    with collections_deferred():
        if not isinstance(policy, Stepwise):
            for assignment in await asyncio.to_thread(policy.assign, snapshot):
                yield assignment
            return
        since_s = time.perf_counter()
        for step in policy.steps(snapshot):
            if step is not None:
                yield step
            if time.perf_counter() - since_s >= STEP_S:
                await asyncio.sleep(0)
                since_s = time.perf_counter()


def is_large(snapshot: Snapshot) -> bool:
    """Whether `decisions` makes the decision in steps or on a thread (`OFF_LOOP_AT`), with
    the collector's passes deferred."""
    return len(snapshot.groups) * len(snapshot.workers) >= OFF_LOOP_AT


async def decide(policy: Policy, snapshot: Snapshot) -> list[Assignment]:
    """Every assignment of `decisions`, once the call ends."""
    async with contextlib.aclosing(decisions(policy, snapshot)) as made:
        return [assignment async for assignment in made]


@contextmanager
def collections_deferred() -> Iterator[None]:
    """The garbage collector off while a large decision runs: a full pass would walk the
    snapshot (30 ms for 16,000 shown jobs) inside one step. What the decision leaves is freed
    by reference counting as it ends; cycles wait for the next pass."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def overtakes(waiting: JobRecord, prefetched: JobRecord, chosen_at_ms: int | None = None) -> bool:
    """`waiting` goes first, and was not waiting when `prefetched` was chosen: when its round
    read the queue (`chosen_at_ms`, else its claim; a job enqueued between the two was never
    weighed against it). The same millisecond counts: the policy, which walks the queue in
    order, would have taken it."""
    if chosen_at_ms is None:
        chosen_at_ms = prefetched.claimed_at_ms or 0
    return waiting.score < prefetched.score and waiting.enqueued_at_ms >= chosen_at_ms


async def withdrawn(client: ComfyClient, job_id: str) -> bool:
    """Ask a worker to drop a prompt it has not started: True only when it confirms that it no
    longer has it (neither queued nor running) and never ran it (no history entry). Any error,
    an unreachable worker included, is no confirmation."""
    try:
        await client.delete([job_id])
        if (await client.queue()).holds(job_id):
            return False
        # Asked after the queue: a prompt that started and ended in between is found here.
        return await client.history(job_id) is None
    except WorkerError:
        return False


def _may_run(job: JobRecord, link: WorkerLink) -> bool:
    placement = job.placement
    if placement.eligible is not None and link.name not in placement.eligible:
        return False
    return cost.group_admits(link.group, placement.group)
