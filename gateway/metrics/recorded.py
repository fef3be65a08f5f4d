"""What the gateway counts as it happens: jobs accepted and finished, their latencies, loads and
cache hits, retries, hangs, Redis repairs, the relay's lag.

One `Metrics` per app, each with its own `CollectorRegistry` (several apps in one process, as
in tests, never share a counter). Labels are bounded: worker, group, model family, outcome and
a short reason; never a job's or a client's id.

Latencies come from the job record's timestamps when the job ends: queue wait (accepted until
claimed by a worker), execution (started until its end) and total (accepted until its end).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.jobs.models import JobRecord, JobState
from workers.comfy.families import family_of

PREFIX = "comfy_gateway"
JOB_LABELS = ("worker", "group", "family")
LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
RECENT_LIMIT = 1000
REASONS = frozenset(
    {
        "stalled",
        "lost by its worker",
        "worker exited",
        "crashed its worker",
        "unsent",
        "taken back",
    }
)
"""Why a job went back to the queue (`Outcomes.requeue`'s outcomes); others count as `other`."""


@dataclass(frozen=True)
class JobLatency:
    """A finished job's seconds from its record (None where a timestamp is missing)."""

    queue_s: float | None
    execution_s: float | None
    total_s: float | None

    @classmethod
    def of(cls, job: JobRecord, ended_at_ms: int) -> JobLatency:
        return cls(
            _between(job.enqueued_at_ms, job.claimed_at_ms),
            _between(job.started_at_ms, ended_at_ms),
            _between(job.enqueued_at_ms, ended_at_ms),
        )


@dataclass(frozen=True)
class Finish:
    """One job that ended here, as the dashboard charts it."""

    finished_at_ms: int
    outcome: str
    worker: str
    seconds: JobLatency


def _between(start_ms: int | None, end_ms: int | None) -> float | None:
    if not start_ms or not end_ms:
        return None
    return max(end_ms - start_ms, 0) / 1000.0


def reason_label(outcome: str) -> str:
    """A requeue's outcome as a bounded label ("taken back for sim2" is "taken back")."""
    if outcome.startswith("taken back"):
        return "taken back"
    return outcome if outcome in REASONS else "other"


class Metrics:
    """The counters and histograms of one app; `registry` is what `/metrics` exposes."""

    def __init__(self, now_ms: Callable[[], int] | None = None):
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.registry = CollectorRegistry()
        self.recent: deque[Finish] = deque(maxlen=RECENT_LIMIT)
        """The latest jobs that ended here, oldest first (the dashboard's charts)."""
        self._jobs()
        self._latencies()
        self._workers()
        self._redis_and_relay()

    def _counter(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(f"{PREFIX}_{name}", help_text, labels, registry=self.registry)

    def _histogram(
        self,
        name: str,
        help_text: str,
        labels: tuple[str, ...] = JOB_LABELS,
        buckets: tuple[float, ...] = LATENCY_BUCKETS_S,
    ) -> Histogram:
        return Histogram(
            f"{PREFIX}_{name}", help_text, labels, registry=self.registry, buckets=buckets
        )

    def _jobs(self) -> None:
        self.accepted = self._counter("jobs_accepted", "Prompts accepted", ("family",))
        self.finished = self._counter(
            "jobs_finished",
            "Jobs ended, by outcome (a job cancelled before it was placed has no worker)",
            ("outcome", *JOB_LABELS),
        )
        self.retries = self._counter(
            "job_retries",
            "Failed attempts sent back to the queue to run again",
            ("worker", "reason"),
        )
        self.redispatches = self._counter(
            "job_redispatches",
            "Jobs sent back to the queue through no fault of theirs (a worker restarted or "
            "drained, a job taken back for an idle worker)",
            ("worker", "reason"),
        )
        self.recovered = self._counter(
            "jobs_recovered",
            "Jobs whose end or whereabouts the relay missed, found by asking the worker: "
            "finished (its result recorded) or adopted (still running there)",
            ("worker", "how"),
        )

    def _latencies(self) -> None:
        self.queue_wait = self._histogram("queue_wait_seconds", "Accepted until claimed")
        self.execution = self._histogram("execution_seconds", "Started until it ended")
        self.total = self._histogram("job_seconds", "Accepted until it ended")
        self.phases = self._histogram(
            "phase_seconds", "Seconds of each phase of a job", ("phase", *JOB_LABELS)
        )

    def _workers(self) -> None:
        self.loads = self._counter(
            "checkpoint_loads",
            "Jobs whose loader nodes executed (a model loaded)",
            ("worker", "family"),
        )
        self.cache_hits = self._counter(
            "checkpoint_cache_hits",
            "Jobs whose loader nodes were all cached (their models were resident)",
            ("worker", "family"),
        )
        self.cached_nodes = self._counter(
            "cached_nodes", "Nodes ComfyUI served from its cache instead of running", ("worker",)
        )
        self.hangs = self._counter(
            "worker_hangs", "Workers that stopped answering while holding jobs", ("worker",)
        )
        self.stalls = self._counter(
            "worker_stalls", "Workers silent too long while holding jobs, probed", ("worker",)
        )

    def _redis_and_relay(self) -> None:
        self.redis_repairs = self._counter(
            "redis_repairs", "Redis restarts noticed and repaired by this node"
        )
        self.redis_repaired_jobs = self._counter(
            "redis_repaired_jobs",
            "Jobs written again after a Redis restart lost them: reasserted (held here) or "
            "restored (accepted here lately)",
            ("how",),
        )
        self.relay_lag = self._histogram(
            "relay_lag_seconds",
            "From a worker's event timestamp until the relay handled it",
            ("worker",),
            LAG_BUCKETS_S,
        )

    # -- what the gateway's parts report ---------------------------------------------------

    def job_accepted(self, checkpoint: str | None) -> None:
        self.accepted.labels(family_of(checkpoint)).inc()

    def job_ended(self, job: JobRecord, state: JobState, worker: str, group: str) -> None:
        """A job that was placed ended (success, error, interrupted, quarantined, given up,
        cancelled while held): counted by outcome, its latencies observed."""
        now_ms = self.now_ms()
        labels = (worker, group, family_of(job.placement.checkpoint))
        self.finished.labels(state.value, *labels).inc()
        seconds = JobLatency.of(job, now_ms)
        if state is not JobState.CANCELLED:
            _observe(self.queue_wait, labels, seconds.queue_s)
            _observe(self.execution, labels, seconds.execution_s)
            _observe(self.total, labels, seconds.total_s)
        self.recent.append(Finish(now_ms, state.value, worker, seconds))

    def pending_cancelled(self) -> None:
        """A job cancelled before any worker had it (no worker, group or family)."""
        self.finished.labels(JobState.CANCELLED.value, "", "", "").inc()

    def observe_phases(
        self, phases_s: Mapping[str, float], *, worker: str, group: str, checkpoint: str | None
    ) -> None:
        """One job's seconds per phase (the ledger's phases; `phase` is its bounded name)."""
        family = family_of(checkpoint)
        for phase, seconds in phases_s.items():
            self.phases.labels(phase, worker, group, family).observe(max(seconds, 0.0))

    def job_requeued(self, worker: str, outcome: str, *, failed: bool) -> None:
        counter = self.retries if failed else self.redispatches
        counter.labels(worker, reason_label(outcome)).inc()

    def models_used(
        self, worker: str, checkpoint: str | None, loader_cached: bool | None, cached_nodes: int
    ) -> None:
        """What a finished job's events said of its models: loaded, or served from memory."""
        family = family_of(checkpoint)
        if loader_cached is True:
            self.cache_hits.labels(worker, family).inc()
        elif loader_cached is False:
            self.loads.labels(worker, family).inc()
        if cached_nodes:
            self.cached_nodes.labels(worker).inc(cached_nodes)

    def relay_event(self, worker: str, stamp_ms: object) -> None:
        """An event the worker stamped (`timestamp`, ms of its wall clock) reached the relay."""
        if isinstance(stamp_ms, int) and not isinstance(stamp_ms, bool):
            lag_s = max(self.now_ms() - stamp_ms, 0) / 1000.0
            self.relay_lag.labels(worker).observe(lag_s)


def _observe(histogram: Histogram, labels: tuple[str, ...], seconds: float | None) -> None:
    if seconds is not None:
        histogram.labels(*labels).observe(seconds)
