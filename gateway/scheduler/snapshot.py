"""What a placement policy sees: frozen views of the waiting jobs and the workers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobView:
    """One waiting job as the policy sees it."""

    job_id: str
    enqueued_at_s: float
    priority: int = 0
    """Higher runs first (from `extra_data.gateway.priority`); ties go by arrival."""
    model_keys: frozenset[str] = frozenset()
    """Every model file the workflow's loader nodes reference (checkpoint, LoRA, VAE, ...)."""
    checkpoint: str | None = None
    family: str = "unknown"
    work_units: float = 1.0
    """Steps x megapixels x batch, summed over sampler nodes."""
    group: str | None = None
    """A/B group the client asked for (`extra_data.gateway.group`), if any."""
    eligible: frozenset[str] | None = None
    """Workers that can run it (validation, group); None means every worker."""
    score: float = 0.0
    """Its place in the queue within its priority (the farm-wide number): lower goes first."""


@dataclass(frozen=True)
class JobGroup:
    key: str
    head: tuple[JobView, ...]
    """The group's first jobs in queue order (at most `queue.HEAD_JOBS`)."""
    count: int
    """All its waiting jobs."""
    work_units: float
    """Summed over all its waiting jobs."""
    enqueued_s_sum: float
    """Sum of its jobs' arrival times: summed waiting is `count * now - enqueued_s_sum`."""
    oldest_s: float
    """The earliest arrival among its head."""
    newest_s: float
    """The arrival of its last job in queue order (its newest, where its jobs share one
    priority): with `oldest_s`, whether arrivals have stopped (`affinity.plan.settled`)."""
    top_priority: int

    @property
    def first(self) -> JobView:
        return self.head[0]

    def waited_s(self, now_s: float) -> float:
        """Seconds its jobs have waited, summed."""
        return max(self.count * now_s - self.enqueued_s_sum, 0.0)


@dataclass(frozen=True)
class WorkerView:
    """One worker (one ComfyUI instance) as the policy sees it."""

    name: str
    group: str = "default"
    free_slots: int = 0
    """How many more jobs it may take now (one running plus at most one prefetched)."""
    outstanding: int = 0
    """Jobs assigned to it and not finished (running or prefetched)."""
    outstanding_s: float = 0.0
    """Expected seconds until it has finished what it already holds."""
    resident: tuple[str, ...] = ()
    """Model keys believed resident, most recently used first."""
    last_checkpoint: str | None = None
    speed: Mapping[str, float] = field(default_factory=dict)
    """Work units per second by model family, learned online."""
    load_s: Mapping[str, float] = field(default_factory=dict)
    """Expected seconds to load a model key that is not resident, by key or family."""
    idle_since_s: float | None = None
    """Idle since this instant on the snapshot's clock (`Snapshot.now_s`); None: it holds jobs."""
    cache_slots: int = 1
    """Checkpoints it keeps resident at once: 1 under ComfyUI's classic cache; under
    `--cache-lru N` as many as N node results hold (`gateway.learning.learn.cache_slots`), as far as
    VRAM allows."""
    fixed_s: Mapping[str, float] = field(default_factory=dict)
    """Seconds per job outside the sampler (encode, decode, save) by model family, learned."""
    queued: tuple[frozenset[str], ...] = ()
    """Model keys of each job assigned to it that has not started yet (prefetched), in order."""
    vram_free_mib: float | None = None
    vram_total_mib: float | None = None
    """Its card's memory (the smallest card of its slot) from NVML; None when unknown."""
    card: str | None = None
    """What it runs on, to compare it with similar workers: its cards' NVML names and memory,
    or the profile it emulates; None when unknown."""
    estimated: frozenset[str] = frozenset()
    """Families in `speed` and `fixed_s` it never measured: estimated from what is known of it
    and of the farm (`gateway.scheduler.estimates`)."""
    estimated_load: frozenset[str] = frozenset()
    """Keys in `load_s` it never measured, estimated likewise."""


@dataclass(frozen=True)
class Snapshot:
    now_s: float
    """The store's wall clock (`time.time`); every instant in a snapshot is on it."""
    jobs: tuple[JobView, ...]
    """Waiting jobs, in queue order (priority, then arrival)."""
    workers: tuple[WorkerView, ...]
    demand_per_s: Mapping[str, float] = field(default_factory=dict)
    """Recent arrival rate of jobs per model key (jobs per second, smoothed); may be empty."""
    groups: tuple[JobGroup, ...] = ()
    """The whole queue as groups of interchangeable jobs (`gateway.scheduler.queue`); `jobs`
    then holds each group's first jobs. Empty: the groups are those of `jobs`."""


@dataclass(frozen=True)
class Why:
    """Why a policy sent a job where it did, for an operator to check: the expected seconds
    until it would finish there and on the best other worker that may run it."""

    reason: str
    """`warm` (its models are resident there), `load`, or `idle` (the ski-rental wait ran out)."""
    done_s: float
    runner_up: str | None = None
    runner_up_done_s: float | None = None
    first_choices: tuple[str, ...] = ()
    """The model families the backlog's split gave this worker first (`affinity.plan`), when it
    restricted the worker; empty when it did not."""
    ahead_of: int = 0
    """How many jobs of its group it went ahead of: a slower worker took it out of turn, since
    the faster ones holding its models reach those jobs first (`affinity.choice.first_behind`)."""

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "reason": self.reason,
            "expected_done_s": round(self.done_s, 3),
            "runner_up": self.runner_up,
            "runner_up_done_s": None
            if self.runner_up_done_s is None
            else round(self.runner_up_done_s, 3),
        }
        if self.first_choices:
            out["first_choices"] = list(self.first_choices)
        if self.ahead_of:
            out["ahead_of"] = self.ahead_of
        return out


@dataclass(frozen=True)
class Assignment:
    job_id: str
    worker: str
    why: Why | None = None
    """Set by policies that reason in seconds (`affinity`)."""
