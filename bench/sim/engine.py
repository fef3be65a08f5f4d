"""The discrete-event simulator: the real policy code against the emulator's cost model.

Each worker is one ComfyUI instance: a local FIFO (the jobs the policy gave it), one running
job, and the emulator's `Residency` deciding, per job, whether and from where its checkpoint
loads; `job_phases` gives the seconds. Whenever something changes (an arrival, a finish, or a
tick every `tick_s` while jobs wait and a worker has room), the simulator builds a `Snapshot`
as the gateway's dispatcher would and applies the policy's assignments, checking the policy's
contract (free slots, eligibility, no job twice). A closed-loop job (`SimJob.follows`) arrives
a think time after the jobs it follows have finished.

Late-binding policies get `slots` per worker (one running plus one prefetched, as the gateway);
the early-binding baselines get an unlimited local queue, as the gateway gives them
(`gateway.scheduler.policy.slots_per_worker`): each job goes to a ComfyUI queue on arrival.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bench.sim.costs import Card
from bench.sim.trace import SimJob
from gateway.learning import demand
from gateway.learning import speed as learned
from gateway.learning.learn import Finished, Knowledge, outstanding_s, speed_views
from gateway.learning.learn import learn as gateway_learn
from gateway.learning.learn import warmed as gateway_warmed
from gateway.scheduler import settle
from gateway.scheduler.cost import models_of
from gateway.scheduler.estimates import with_estimates
from gateway.scheduler.policy import ASK_EVERY_S, EARLY_CAPACITY, Policy
from gateway.scheduler.queue import QueueIndex, snapshot_of
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView
from gateway.scheduler.takeback import take_backs
from gateway.scheduler.warming import warm_up_job, warm_ups
from workers.emulator.card.costmodel import JobShape, LoadTier, job_phases
from workers.emulator.card.pagecache import PageCache
from workers.emulator.card.residency import Residency
from workers.warmup.prompts import (
    PROBE_STEPS,
    WARMUP_SIZE_PX,
    WarmupResult,
    native_size_px,
    probe_work_units,
)


class ContractError(AssertionError):
    """The policy broke the Policy contract."""


class StallError(RuntimeError):
    """Jobs wait, workers are free, and the policy has placed nothing for `stall_s`."""


@dataclass(frozen=True)
class SimConfig:
    slots: int = 2
    """Free slots per worker for late-binding policies (running + prefetched)."""
    tick_s: float = ASK_EVERY_S
    """How often the policy is asked again while jobs wait and a worker has room, as the
    dispatcher asks it."""
    dispatch_s: float = 0.02
    """Gap before a job sent to an idle worker starts (HTTP + bookkeeping); prefetch hides it."""
    settle_s: float = settle.SETTLE_S
    """The dispatcher's round waits until no job has arrived for this long
    (`gateway.scheduler.settle`); 0: a round at every arrival."""
    settle_cap_s: float = settle.SETTLE_CAP_S
    """... and at most this long after the first job it waits for."""
    abort_backlog: int = 2000
    """Stop (and call the run diverged) when this many jobs are unfinished."""
    demand_half_life_s: float = 60.0
    stall_s: float = 600.0
    warm_cold: bool = True
    """A cold worker left idle warms up on a checkpoint clients asked for, as the dispatcher
    has it do (`gateway.scheduler.warming`); False: it pays its first use on a client job."""
    one_host: bool = False
    """Every worker on one host, sharing its page cache (a file one read from disk is a
    page-cache read for all), as the emulators one `serve` starts (`--page-cache`); False: a
    host per worker."""
    learned_speeds: bool = False
    """Give policies what the gateway would have learned (`gateway.learning.learn`: speeds and load
    seconds, seeded by the warm-up of each worker's first checkpoint, then learned from every
    finished job) instead of speeds fitted to the true costs and the true load seconds."""


@dataclass
class JobRecord:
    job: SimJob
    worker: str = ""
    start_s: float = float("nan")
    end_s: float = float("nan")
    load_s: float = 0.0
    run_s: float = 0.0
    loaded: bool = False
    loader_s: float = 0.0
    """Seconds of its loader node (the read; the copy to VRAM lands in the sampler)."""
    first_use_s: float = 0.0
    """The card's first use it paid, before its sampler's first step (a cold worker's first
    job)."""


@dataclass
class WorkerState:
    card: Card
    residency: Residency
    queue: deque[JobView] = field(default_factory=deque)
    running: JobView | None = None
    began_s: float = 0.0
    """When its running job (or warm-up) started."""
    end_s: float = 0.0
    resident_before: tuple[str, ...] = ()
    """What it held before its running job (or warm-up) started: where the gateway's estimate
    of that job's remainder starts from."""
    idle_since_s: float | None = 0.0
    last_checkpoint: str | None = None
    run_total_s: float = 0.0
    load_total_s: float = 0.0
    warm_up_s: float = 0.0
    """Seconds of warm-ups run (`Simulator.warm_cold`), their loads included."""
    loads: int = 0
    speed: dict[str, float] = field(default_factory=dict)
    fixed_s: dict[str, float] = field(default_factory=dict)
    knowledge: Knowledge | None = None
    """What the gateway would have learned (`learned_speeds`), else None: the truth is known."""
    cold: bool = False
    """It has run nothing (no initial checkpoint warmed up): its first job pays the card's
    first-use penalty (CUDA's first use, the kernels' warm-up), as on a farm `serve` starts
    with nothing preloaded."""
    warming: JobView | None = None
    """The warm-up it runs (`gateway.scheduler.warming.warm_up_job`): a job of the gateway's
    own, which holds a slot and which jobs placed meanwhile queue behind."""
    _load_view: dict[str, float] | None = None

    @property
    def name(self) -> str:
        return self.card.spec.name

    @property
    def outstanding(self) -> int:
        return len(self.queue) + (self.running is not None) + (self.warming is not None)


@dataclass
class RunResult:
    records: list[JobRecord]
    workers: list[WorkerState]
    diverged: bool
    end_s: float
    calls: int


class Simulator:
    def __init__(
        self,
        policy: Policy,
        cards: Sequence[Card],
        catalogue: dict[str, str],
        initial: dict[str, str],
        config: SimConfig,
        slots: int,
    ) -> None:
        self.policy = policy
        self.config = config
        self.slots = slots
        self.catalogue = catalogue  # checkpoint -> family
        host: PageCache | None = set() if config.one_host else None
        self.workers = {
            card.spec.name: _worker(card, initial.get(card.spec.name), catalogue, config, host)
            for card in cards
        }
        self.everyone = frozenset(self.workers)
        """What the gateway's validation marks a job eligible on: every worker's catalogue here
        has every checkpoint."""
        self.taken_back = 0
        """Prefetched jobs moved to a worker that went idle."""
        self.queue = QueueIndex()
        """The waiting jobs, grouped as the dispatcher's Redis index groups them."""
        self.records: dict[str, JobRecord] = {}
        self.events: list[tuple[float, int, str, str]] = []
        self.seq = itertools.count()
        self.meter = demand.DemandMeter(config.demand_half_life_s)
        self.latest: dict[str, JobView] = {}
        """The latest job seen per checkpoint: what a cold worker may warm up on."""
        self.newest_arrival_s: float | None = None
        """When the latest job arrived: cold workers warm up once arrivals have paused."""
        self.settling: settle.Settling | None = None
        """The arrivals the policy has not been asked about yet (`gateway.scheduler.settle`)."""
        self.unfinished = 0
        self.tick_at: float | None = None
        self.calls = 0
        self.followers: dict[str, list[str]] = {}
        """Closed loop: the jobs each job's finish releases (`SimJob.follows`)."""
        self.pending: dict[str, int] = {}
        """Closed loop: how many of its `follows` each unreleased job still waits for."""
        self._believed: dict[str, WorkerView] | None = None
        """`believed` of every worker until one learns or its loads move (None: stale)."""

    # --- events -------------------------------------------------------------------------
    def push(self, at_s: float, kind: str, what: str) -> None:
        heapq.heappush(self.events, (at_s, next(self.seq), kind, what))

    def run(self, jobs: Sequence[SimJob]) -> RunResult:
        by_id = {job.job_id: job for job in jobs}
        for job in jobs:
            self.admit(job)
        now = 0.0
        diverged = False
        progress_s = 0.0
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, _, kind, what = heapq.heappop(self.events)
                self.handle(now, kind, what, by_id)
                progress_s = now if kind != "tick" else progress_s
            self.dispatch(now)
            if now - progress_s > self.config.stall_s:
                raise StallError(f"nothing placed for {self.config.stall_s} s at t={now:.1f}")
            if self.unfinished > self.config.abort_backlog:
                diverged = True
                break
        return RunResult(
            list(self.records.values()), list(self.workers.values()), diverged, now, self.calls
        )

    def admit(self, job: SimJob) -> None:
        """Record the job and schedule its arrival, or, closed loop, its release."""
        self.records[job.job_id] = JobRecord(job)
        if not job.follows:
            self.push(job.arrival_s, "arrive", job.job_id)
            return
        self.pending[job.job_id] = len(job.follows)
        for before in job.follows:
            self.followers.setdefault(before, []).append(job.job_id)

    def release(self, now: float, job_id: str) -> None:
        """Closed loop: the jobs waiting only for `job_id` arrive after their think time."""
        for follower in self.followers.pop(job_id, ()):
            self.pending[follower] -= 1
            if self.pending[follower] == 0:
                self.push(now + self.records[follower].job.think_s, "arrive", follower)

    def handle(self, now: float, kind: str, what: str, by_id: dict[str, SimJob]) -> None:
        if kind == "arrive":
            job = by_id[what]
            if job.follows:  # released now: it arrives now
                job = self.records[what].job = replace(job, arrival_s=now)
            view = job_view(job, self.everyone)
            self.queue.add(view)
            self.unfinished += 1
            self.meter = demand.observe(self.meter, models_of(view), now)
            self.newest_arrival_s = now
            self.settling = settle.arrived(self.settling, now)
            if view.checkpoint:
                self.latest[view.checkpoint] = view
        elif kind == "finish":
            self.finish(now, self.workers[what])
        elif kind == "tick":
            self.tick_at = None
        elif kind == "warmed":
            self.warmed(now, self.workers[what])

    # --- the policy -----------------------------------------------------------------------
    def dispatch(self, now: float) -> None:
        if not self.settled(now):  # the dispatcher's whole round waits, take-backs included
            return
        self.place_waiting(now)
        if self.slots < EARLY_CAPACITY:  # as the dispatcher: early binders move nothing
            self.take_back_for_idle(now)
        if self.config.warm_cold:
            self.warm_cold(now)

    def settled(self, now: float) -> bool:
        """Whether the arrivals have paused long enough for a round (as the dispatcher waits
        for them: `gateway.scheduler.settle`); if not, the round runs when they have."""
        if self.settling is None:
            return True
        until_s = self.settling.until_s(self.config.settle_s, self.config.settle_cap_s)
        if now < until_s:
            self.tick(until_s)
            return False
        self.settling = None
        return True

    def take_back_for_idle(self, now: float) -> None:
        """As the dispatcher does (`gateway.scheduler.takeback`): a worker that went idle
        takes a job prefetched behind a long one where it finishes it sooner."""
        if not any(w.outstanding == 0 for w in self.workers.values()):
            return
        queued = {w.name: list(w.queue) for w in self.workers.values() if w.queue}
        if not queued:
            return
        views = [self.worker_view(w, now) for w in self.workers.values()]
        for move in take_backs(views, queued):
            holder, taker = self.workers[move.holder], self.workers[move.worker]
            view = next(view for view in holder.queue if view.job_id == move.job_id)
            holder.queue.remove(view)
            taker.queue.append(view)
            self.taken_back += 1
            if taker.running is None and taker.warming is None:
                self.start(now + self.config.dispatch_s, taker)

    def place_waiting(self, now: float) -> None:
        if not len(self.queue) or not any(self.free(w) for w in self.workers.values()):
            return
        snapshot = self.snapshot(now)
        self.calls += 1
        assignments = self.policy.assign(snapshot)
        self.check(assignments, snapshot)
        for assignment in assignments:
            worker = self.workers[assignment.worker]
            view = self.queue.remove(assignment.job_id)
            assert view is not None
            worker.queue.append(view)
            if worker.running is None and worker.warming is None:
                self.start(now + self.config.dispatch_s, worker)
        if len(self.queue) and any(self.free(w) for w in self.workers.values()):
            self.tick(now + self.config.tick_s)

    def tick(self, at: float) -> None:
        """Ask the policy again at `at` (one look at the earliest instant asked for)."""
        if self.tick_at is None or self.tick_at > at:
            self.tick_at = at
            self.push(at, "tick", "")

    def free(self, worker: WorkerState) -> int:
        return max(self.slots - worker.outstanding, 0)

    def snapshot(self, now: float) -> Snapshot:
        """As the dispatcher builds it (`queue.snapshot_of`): the whole queue as groups."""
        workers = tuple(self.worker_view(w, now) for w in self.workers.values())
        return snapshot_of(now, self.queue.groups(), workers, demand.rates_at(self.meter, now))

    def check(self, assignments: Sequence[Assignment], snapshot: Snapshot) -> None:
        shown = {job.job_id: job for job in snapshot.jobs}
        views = {w.name: w for w in snapshot.workers}
        given: dict[str, int] = {}
        seen: set[str] = set()
        for a in assignments:
            if a.job_id in seen or a.job_id not in shown:
                raise ContractError(f"job {a.job_id} assigned twice or not waiting")
            seen.add(a.job_id)
            job = shown[a.job_id]
            if job.eligible is not None and a.worker not in job.eligible:
                raise ContractError(f"job {a.job_id} sent to ineligible {a.worker}")
            given[a.worker] = given.get(a.worker, 0) + 1
            if given[a.worker] > views[a.worker].free_slots:
                raise ContractError(f"{a.worker} given more than its free slots")

    # --- workers --------------------------------------------------------------------------
    def worker_view(self, worker: WorkerState, now: float) -> WorkerView:
        """As the dispatcher shows it (`gateway.dispatch.dispatcher.Dispatcher._view`): what
        it believes, and what it holds, with the gateway's estimate of the seconds that takes
        (`gateway.learning.learn.outstanding_s`), not the truth: a job that runs longer than
        believed is believed done sooner, here as live."""
        believed = self.believed(worker)
        started = worker.warming if worker.warming is not None else worker.running
        held = [(view, 0.0) for view in worker.queue]
        if started is not None:
            held.insert(0, (started, max(now - worker.began_s, 0.0)))
        before = worker.knowledge.resident if worker.knowledge is not None else None
        estimate = replace(
            believed,
            resident=worker.resident_before if before is None else before,
            cache_slots=worker.card.cache_slots,
        )
        return replace(
            believed,
            free_slots=self.free(worker),
            outstanding=worker.outstanding,
            outstanding_s=outstanding_s(estimate, held, cold=worker.cold),
            resident=worker.residency.resident(),
            last_checkpoint=worker.last_checkpoint,
            idle_since_s=worker.idle_since_s,
            cache_slots=worker.card.cache_slots,
            queued=tuple(models_of(view) for view in worker.queue),
        )

    def believed(self, worker: WorkerState) -> WorkerView:
        """Its speeds and loads as the gateway's dispatcher believes them
        (`gateway.dispatch.estimated`): its own, and estimates of what it never measured from what
        is
        known of it and of the farm (`gateway.scheduler.estimates.with_estimates`)."""
        if self._believed is None:
            views = with_estimates([self.learned_view(w) for w in self.workers.values()])
            self._believed = {view.name: view for view in views}
        return self._believed[worker.name]

    def learned_view(self, worker: WorkerState) -> WorkerView:
        """Its own speeds and loads (learned, or the truth in the known-speed mode)."""
        return WorkerView(
            name=worker.name,
            speed=worker.speed,
            fixed_s=worker.fixed_s,
            load_s=self.load_view(worker),
            card=card_of(worker.card),
        )

    def load_view(self, worker: WorkerState) -> dict[str, float]:
        """Expected load seconds per checkpoint from where it would come now (a resident one:
        what reloading it from the page cache would cost)."""
        if worker.knowledge is not None:
            return dict(worker.knowledge.load_s)  # learned by key, else by family, else default
        if worker._load_view is None:
            view = {}
            for checkpoint, family in self.catalogue.items():
                tier = worker.residency.peek(checkpoint) or LoadTier.PAGE_CACHE
                view[checkpoint] = worker.card.load_s(family, tier)
            worker._load_view = view
        return worker._load_view

    def start(self, at_s: float, worker: WorkerState) -> None:
        view = worker.queue.popleft()
        record = self.records[view.job_id]
        shape = record.job.shape
        worker.resident_before = worker.residency.resident()
        tier = worker.residency.touch(shape.checkpoint, shape.family)
        worker._load_view = None
        self._believed = None
        phases = job_phases(worker.card.model, shape, load_tier=tier, first_job=worker.cold)
        load = worker.card.load_s(shape.family, tier) if tier is not None else 0.0
        record.worker, record.start_s = worker.name, at_s
        record.load_s, record.run_s, record.loaded = load, phases.total_s - load, tier is not None
        record.loader_s = phases.load_s
        record.first_use_s = worker.card.model.first_job_penalty_s() if worker.cold else 0.0
        record.end_s = at_s + phases.total_s
        worker.running, worker.began_s, worker.end_s = view, at_s, record.end_s
        worker.idle_since_s = None
        worker.last_checkpoint = shape.checkpoint
        worker.run_total_s += record.run_s
        worker.load_total_s += load
        worker.loads += tier is not None
        self.push(record.end_s, "finish", worker.name)

    def warm_cold(self, now: float) -> None:
        """As the dispatcher does (`gateway.scheduler.warming`): a cold worker left idle warms
        up on a checkpoint clients asked for, paying its first use there, once no job has
        arrived for a tick."""
        cold = [w for w in self.workers.values() if w.cold and w.outstanding == 0]
        if not cold or not self.latest:
            return
        newest_s = self.newest_arrival_s
        if newest_s is not None and now - newest_s < self.config.tick_s - 1e-9:
            self.tick(newest_s + self.config.tick_s)  # once arrivals have paused, as the dispatcher
            return
        views = {w.name: self.worker_view(w, now) for w in self.workers.values()}
        rates = demand.rates_at(self.meter, now)
        chosen = warm_ups([views[w.name] for w in cold], list(views.values()), self.latest, rates)
        for name, checkpoint in chosen:
            worker = self.workers[name]
            family = self.catalogue[checkpoint]
            worker.resident_before = worker.residency.resident()
            tier = worker.residency.touch(checkpoint, family)
            shape = JobShape(checkpoint, family, 1, WARMUP_SIZE_PX, WARMUP_SIZE_PX)
            phases = job_phases(worker.card.model, shape, load_tier=tier, first_job=True)
            load = worker.card.load_s(family, tier) if tier is not None else 0.0
            worker.warming = warm_up_job(self.latest[checkpoint], now)
            worker.idle_since_s, worker.began_s = None, now + self.config.dispatch_s
            worker.end_s = worker.began_s + phases.total_s
            worker.last_checkpoint = checkpoint
            worker.loads += tier is not None
            worker.load_total_s += load
            worker.warm_up_s += phases.total_s
            worker._load_view = None
            self._believed = None
            self.push(worker.end_s, "warmed", name)

    def warmed(self, now: float, worker: WorkerState) -> None:
        """Its warm-up ended: warm, holding the checkpoint, its cold read learned
        (`gateway.dispatch.links.WorkerLink.warmed`, no speed probe); then the jobs placed
        behind it."""
        assert worker.warming is not None and worker.warming.checkpoint is not None
        checkpoint, worker.warming = worker.warming.checkpoint, None
        worker.cold = False
        if worker.knowledge is not None:
            read_s = worker.card.model.read_s(self.catalogue[checkpoint], LoadTier.DISK)
            worker.knowledge = gateway_warmed(worker.knowledge, [WarmupResult(checkpoint, read_s)])
        self._believed = None
        if worker.queue:
            self.start(now, worker)
        else:
            worker.idle_since_s = now

    def finish(self, now: float, worker: WorkerState) -> None:
        if self.config.learned_speeds and worker.running is not None:
            learn(worker, self.records[worker.running.job_id])
            self._believed = None
        if worker.running is not None:
            self.release(now, worker.running.job_id)
        worker.running, worker.cold = None, False
        self.unfinished -= 1
        if worker.queue:
            self.start(now, worker)
        else:
            worker.idle_since_s = now


def card_of(card: Card) -> str:
    """The card a simulated worker is compared by, as the gateway names an emulated one
    (`gateway.dispatch.links.WorkerLink.card`)."""
    return f"emulated {card.spec.profile}"


def job_view(job: SimJob, eligible: frozenset[str] | None = None) -> JobView:
    """The job as the dispatcher shows it: `eligible` the workers whose catalogue has its
    files, as the gateway's validation marks every job it accepts (every worker here)."""
    shape: JobShape = job.shape
    return JobView(
        job_id=job.job_id,
        enqueued_at_s=job.arrival_s,
        model_keys=frozenset((shape.checkpoint,)),
        checkpoint=shape.checkpoint,
        family=shape.family,
        work_units=job.work_units,
        eligible=eligible,
        score=job.arrival_s,
    )


def _worker(
    card: Card,
    initial: str | None,
    catalogue: dict[str, str],
    config: SimConfig,
    host: PageCache | None = None,
) -> WorkerState:
    files = (initial,) if initial else ()
    flags = card.model.flags
    residency = Residency(card.model.profile, flags, files_read=files, page_cache=host)
    if initial:
        residency.touch(initial, catalogue[initial])
    cold = initial is None
    if config.learned_speeds:
        state = WorkerState(card, residency, last_checkpoint=initial, cold=cold)
        state.knowledge = warmed_up(card, initial, catalogue[initial]) if initial else Knowledge()
        _publish(state)
        return state
    fitted = dict(card.speed), dict(card.fixed_s)
    return WorkerState(
        card, residency, last_checkpoint=initial, speed=fitted[0], fixed_s=fitted[1], cold=cold
    )


def warmed_up(card: Card, checkpoint: str, family: str) -> Knowledge:
    """What the gateway knows of a worker once its warm-up of `checkpoint` ran
    (`gateway.dispatch.links.WorkerLink.warmed`): the cold read from disk as the load of the
    checkpoint and of its family, the speed probe (one warm job of `PROBE_STEPS` at the family's
    native size, then at half its side) as its family's speed (`speed.seed_from_probes`). Other
    families stay unmeasured until a job of theirs runs (placement estimates them from the farm
    meanwhile: `gateway.scheduler.estimates`)."""
    points = []
    for small in (False, True):
        side = native_size_px(family) // (2 if small else 1)
        seconds = card.warm_s(JobShape("", family, PROBE_STEPS, side, side))
        points.append((probe_work_units(family, small=small), seconds))
    estimate = learned.seed_from_probes(points)
    assert estimate is not None
    read_s = card.model.read_s(family, LoadTier.DISK)
    return Knowledge(
        book={family: estimate},
        load_s={checkpoint: read_s, family: read_s},
        resident=(checkpoint,),
    )


def learn(worker: WorkerState, record: JobRecord) -> None:
    """Feed a finished job to the worker's knowledge through the gateway's own learning
    (`gateway.learning.learn.learn`), timed as the gateway times it (`gateway.learning.timing`):
    the loader node, the rest, and the sampler's set-up before its first step (the copy to VRAM
    and, on a cold worker's first job, the card's first use)."""
    assert worker.knowledge is not None
    shape = record.job.shape
    copy_s = record.load_s - record.loader_s
    done = Finished(
        family=shape.family,
        work_units=record.job.work_units,
        models=frozenset((shape.checkpoint,)),
        load_s=record.loader_s,
        run_s=record.run_s + copy_s,
        loader_cached=not record.loaded,
        setup_s=copy_s + record.first_use_s,
        first_use=record.first_use_s > 0,
    )
    worker.knowledge = gateway_learn(worker.knowledge, done, worker.card.cache_slots)
    _publish(worker)


def _publish(worker: WorkerState) -> None:
    assert worker.knowledge is not None
    worker.speed, worker.fixed_s = speed_views(worker.knowledge.book)
