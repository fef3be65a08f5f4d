"""The gateway's live view of each worker it owns: connection, held jobs, progress, residency."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gateway.jobs.history import Heard
from gateway.jobs.models import JobRecord
from gateway.learning.learn import (
    Finished,
    Knowledge,
    NodeClock,
    cache_slots,
    learn,
    learn_from_twin,
    shifted,
    warmed,
)
from gateway.learning.speed import SpeedEstimate
from gateway.scheduler.snapshot import JobView
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle
from workers.supervision.supervisor import emulated_vram
from workers.warmup.prompts import WarmupResult

log = logging.getLogger(__name__)


class WorkerState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    """Answering, relay connected: may take jobs."""
    DISCONNECTED = "disconnected"
    """Its event socket is down: no new jobs until it is back and reconciled."""
    LOST = "lost"
    """Its process exited or it refuses connections."""


@dataclass
class Held:
    """A job sent to this worker: the attempt the gateway expects answers for."""

    attempt: int
    client_id: str | None
    checkpoint: str | None = None
    model_keys: tuple[str, ...] = ()
    abandoned: bool = False
    """Given up on (stalled): its end is a failed attempt to retry, not the job's result."""
    record: JobRecord | None = None
    """The job as claimed (saves reading it back when it finishes)."""
    started_at_ms: int | None = None
    sid: str | None = None
    """The relay sid it was sent under; events come only while that connection lasts."""
    first_use: bool = False
    """The worker was cold and not warming up when it was sent (`WorkerLink.cold`): it pays
    the card's first use (`gateway.learning.timing.Finished.first_use`)."""
    chosen_at_ms: int | None = None
    """When the round that chose it read the queue (store clock): a job enqueued since was
    never weighed against it (None: its claim time)."""
    sent_at_s: float = field(default_factory=time.monotonic)
    """When this node sent it (or adopted it), on this node's monotonic clock: the
    watchdog's clock starts there."""
    clock: NodeClock | None = None
    """Its node times from `executing` transitions, once it started here."""
    progress: tuple[int, int] | None = None
    """Its latest `progress` (value, max): the steps of the sampler that runs."""
    ended: bool = False
    """The worker announced its end (`executing` null); its history entry may be on its way.
    A crash after that is not its fault."""
    heard: Heard = field(default_factory=Heard)
    """Its entry as its events told it (used only if the worker dies before giving its own)."""


@dataclass(frozen=True)
class Restored:
    """The saved learned state a link started from (`gateway.farm.learned_store`)."""

    node: str
    """The gateway node that saved it."""
    saved_at_ms: int
    restored_at_ms: int


@dataclass
class WorkerLink:
    """One worker owned by this gateway node."""

    handle: WorkerHandle
    client: ComfyClient
    sid: str
    state: WorkerState = WorkerState.STARTING
    held: dict[str, Held] = field(default_factory=dict)
    running: str | None = None
    last_progress_s: float = 0.0
    last_checkpoint: str | None = None
    resident: tuple[str, ...] = ()
    idle_since_s: float | None = field(default_factory=time.monotonic)
    """When it last gave back its last job (or was made, holding none), on this node's
    monotonic clock (`release`'s); None while it holds jobs. The dispatcher puts it on the
    store's wall clock for a `Snapshot`."""
    object_info: dict[str, Any] | None = field(default=None, repr=False)
    draining: bool = False
    """Takes no new jobs (an operator's drain, or the gateway stopping); finishes its own."""
    load_s: dict[str, float] = field(default_factory=dict)
    """Seconds to load a model key here, as measured (seeded by the warm-up)."""
    vram: tuple[float, float] | None = None
    """(free, total) MiB of its card from telemetry; None without NVML."""
    gpu_names: tuple[str, ...] = ()
    """The NVML name of each card of its slot, from telemetry; empty without NVML."""
    speed_book: Mapping[str, SpeedEstimate] = field(default_factory=dict)
    """Speed estimates by model family, learned from its finished jobs."""
    lessons: int = 0
    """Finished jobs learned from on this node: the memory saves the link when it moved."""
    restored: Restored | None = None
    listening: bool = False
    """Its relay's event socket is open: frames of its jobs may still be on their way."""
    last_placement: dict[str, object] | None = None
    """Why the policy sent it its latest job (`scheduler.snapshot.Why`), with the job's id."""
    unresponsive_since_s: float | None = None
    """Since when its HTTP has not answered the liveness probe (`gateway.recovery.liveness`); None
    while it answers. An unresponsive worker is out of the ready set."""
    known: dict[str, Any] = field(default_factory=dict, repr=False)
    """Its last answer to each farm-wide GET (`/system_stats`, `/models`, ...), served when it
    is too slow to ask."""
    cold: bool = False
    """Started by this node's supervisor with nothing preloaded, it has run no prompt yet: the
    first pays the card's first use (`gateway.scheduler.warming`)."""
    warming: JobView | None = None
    """The warm-up it runs (`gateway.scheduler.warming.warm_up_job`): a job of the gateway's
    own, which holds a slot and which client jobs sent meanwhile queue behind."""
    warming_since_s: float = 0.0
    """When it started, on this node's monotonic clock."""
    last_warm_up: dict[str, Any] | None = None
    """Its latest such warm-up: checkpoint, started and ended (store clock, ms; ended None
    while it runs), and whether it succeeded (`/gateway/workers`)."""

    @property
    def cache_slots(self) -> int:
        spec = self.handle.spec
        # An emulated card has no NVML: its profile's VRAM is what its launch was planned on.
        vram_total_mib = self.vram[1] if self.vram else emulated_vram(spec)
        return cache_slots(spec.args, vram_total_mib, launched=spec.url is None)

    def learn(self, done: Finished) -> None:
        """Fold a finished prompt into what is believed of this worker."""
        before = self.knowledge
        after = learn(before, done, self.cache_slots)
        for family, was, now in shifted(before.book, after.book):
            log.warning(
                "worker %s runs %s at %.3g work units/s, was %.3g: a throttled or shared card?",
                self.name,
                family,
                now,
                was,
            )
        self.speed_book, self.load_s, self.resident = after.book, dict(after.load_s), after.resident
        self.lessons += 1

    def warmed(self, warmups: Sequence[WarmupResult]) -> None:
        """The warm-ups' cold timings seed the load estimates, their speed probes the speeds;
        the last checkpoint is loaded (`gateway.learning.learn.warmed`)."""
        after = warmed(self.knowledge, warmups)
        self.speed_book, self.load_s, self.resident = after.book, dict(after.load_s), after.resident
        if warmups:
            self.last_checkpoint = warmups[-1].checkpoint
            self.cold = False
            self.lessons += 1  # worth keeping (gateway.farm.learned_store saves what changed)

    @property
    def knowledge(self) -> Knowledge:
        return Knowledge(self.speed_book, self.load_s, self.resident)

    def learn_from_twin(self, origin: Knowledge, done: Finished) -> None:
        """Fold in what its twin, which knew `origin`, learned from `done`: speeds and load
        seconds, not residency (`twin_key`)."""
        after = learn_from_twin(self.knowledge, origin, done)
        self.speed_book, self.load_s = after.book, dict(after.load_s)
        self.lessons += 1

    @property
    def twin_key(self) -> tuple[object, ...] | None:
        """Workers with the same key are instances on the same cards launched alike (the same
        GPU slot, ComfyUI, Python and args): one's speeds and load seconds are the others', so
        each learns from every twin's jobs, and like workers' noise does not tell them apart.
        None for a worker started elsewhere, an emulated one (each emulates its own card) or
        one with no GPU slot."""
        spec = self.handle.spec
        if spec.url is not None or spec.emulate is not None or not spec.gpu_indices:
            return None
        return (spec.gpu_indices, spec.args, spec.comfyui, spec.python)

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def card(self) -> str | None:
        """What it runs on, to compare it with similar workers: the profile it emulates, else
        its cards' NVML names and memory; None until telemetry has read them."""
        spec = self.handle.spec
        if spec.emulate is not None:
            return f"emulated {spec.emulate}"
        if not self.gpu_names:
            return None
        memory = f" {self.vram[1]:.0f} MiB" if self.vram else ""
        return " + ".join(self.gpu_names) + memory

    @property
    def group(self) -> str:
        return self.handle.spec.group

    @property
    def url(self) -> str:
        return self.handle.url

    def deaf(self) -> list[str]:
        """Held jobs whose events go to a closed relay connection: poll them instead."""
        return [job_id for job_id, held in self.held.items() if held.sid != self.sid]

    @property
    def accepting(self) -> bool:
        """Connected, answering, warm (its supervisor says ready) and not draining: may take
        jobs."""
        return self.answering and self.handle.ready and not self.draining

    @property
    def responsive(self) -> bool:
        """Its HTTP answered the latest liveness probe (or none has failed yet)."""
        return self.unresponsive_since_s is None

    @property
    def answering(self) -> bool:
        """Connected and answering: in the ready set."""
        return self.state is WorkerState.READY and self.responsive

    def free_slots(self, capacity: int) -> int:
        if not self.accepting:
            return 0
        return max(0, capacity - len(self.held) - (self.warming is not None))

    def quiet_since_s(self) -> float:
        """The last sign of life of its jobs: an event, or the latest job sent to it."""
        sent_s = max((held.sent_at_s for held in self.held.values()), default=0.0)
        return max(self.last_progress_s, sent_s)

    def stalled(self, now_s: float, stall_timeout_s: float) -> bool:
        """It holds jobs and nothing has been heard of them for `stall_timeout_s`."""
        return bool(self.held) and now_s - self.quiet_since_s() > stall_timeout_s

    def healthy(self, now_s: float, stall_timeout_s: float) -> bool:
        return (
            self.state is WorkerState.READY
            and self.handle.alive()
            and not self.stalled(now_s, stall_timeout_s)
        )

    def hold(self, job_id: str, held: Held) -> None:
        self.held[job_id] = held
        self.idle_since_s = None
        self.cold = False

    def release(self, job_id: str, clock: Callable[[], float] = time.monotonic) -> Held | None:
        held = self.held.pop(job_id, None)
        if self.running == job_id:
            self.running = None
        if not self.held:
            self.idle_since_s = clock()
        return held


class Links:
    """The workers of this node, by name."""

    def __init__(self, links: list[WorkerLink]):
        self._by_name = {link.name: link for link in links}

    def __iter__(self) -> Iterator[WorkerLink]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str | None) -> WorkerLink | None:
        return self._by_name.get(name) if name else None

    def ready(self) -> list[WorkerLink]:
        """Connected and answering (a hung worker is left out at once)."""
        return [link for link in self if link.answering]

    def accepting(self) -> list[WorkerLink]:
        return [link for link in self if link.accepting]

    def twins(self, link: WorkerLink) -> list[WorkerLink]:
        """The other workers sharing `link`'s cards, launched alike (`WorkerLink.twin_key`)."""
        key = link.twin_key
        if key is None:
            return []
        return [other for other in self if other is not link and other.twin_key == key]

    def share_a_card(self, link: WorkerLink) -> bool:
        """Whether another worker of this node runs on one of `link`'s GPUs."""
        cards = set(link.handle.spec.gpu_indices)
        return any(
            other is not link and cards & set(other.handle.spec.gpu_indices) for other in self
        )

    def owner_of(self, job_id: str) -> WorkerLink | None:
        return next((link for link in self if job_id in link.held), None)
