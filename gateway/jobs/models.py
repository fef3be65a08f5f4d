"""Jobs as the gateway stores them: states, the record of an accepted prompt, its placement view."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gateway.learning.learn import family_of
from gateway.scheduler.snapshot import JobView


class JobState(StrEnum):
    PENDING = "pending"
    """Waiting in Redis for a worker."""
    ASSIGNED = "assigned"
    """Claimed for one worker and sent (or being sent) to it; not started yet."""
    RUNNING = "running"
    """The worker announced `execution_start`."""
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    """Removed before it ran (delete or interrupt of a pending job): no history entry."""
    QUARANTINED = "quarantined"
    """Crashed its worker too often (poison): never run again; an error entry in history,
    its record (with the workflow) kept for inspection at /gateway/jobs/{id}."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {
        JobState.SUCCESS,
        JobState.ERROR,
        JobState.INTERRUPTED,
        JobState.CANCELLED,
        JobState.QUARANTINED,
    }
)
HELD = frozenset({JobState.ASSIGNED, JobState.RUNNING})


@dataclass(frozen=True)
class Placement:
    """What the placement policy needs to know about a job (stored with it as JSON)."""

    checkpoint: str | None = None
    model_keys: tuple[str, ...] = ()
    work_units: float = 1.0
    group: str | None = None
    eligible: tuple[str, ...] | None = None
    experiment: str | None = None
    """The A/B experiment that chose its group (`gateway.ledger.experiments`)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "checkpoint": self.checkpoint,
                "model_keys": list(self.model_keys),
                "work_units": self.work_units,
                "group": self.group,
                "eligible": None if self.eligible is None else list(self.eligible),
                "experiment": self.experiment,
            }
        )

    def job_view(
        self, job_id: str, *, enqueued_at_ms: int, priority: int = 0, number: float = 0.0
    ) -> JobView:
        """A waiting job with this placement, as the policy sees it."""
        return JobView(
            job_id=job_id,
            enqueued_at_s=enqueued_at_ms / 1000.0,
            priority=priority,
            model_keys=frozenset(self.model_keys),
            checkpoint=self.checkpoint,
            family=family_of(self.checkpoint),
            work_units=self.work_units,
            group=self.group,
            eligible=None if self.eligible is None else frozenset(self.eligible),
            score=number,
        )

    @classmethod
    def from_json(cls, text: str | None) -> Placement:
        if not text:
            return cls()
        data = json.loads(text)
        eligible = data.get("eligible")
        return cls(
            checkpoint=data.get("checkpoint"),
            model_keys=tuple(data.get("model_keys") or ()),
            work_units=float(data.get("work_units") or 1.0),
            group=data.get("group"),
            eligible=None if eligible is None else tuple(eligible),
            experiment=data.get("experiment"),
        )


@dataclass(frozen=True)
class NewJob:
    """An accepted, validated prompt about to be written to Redis."""

    job_id: str
    prompt: Mapping[str, Any]
    extra_data: Mapping[str, Any]
    client_id: str | None
    outputs: tuple[str, ...]
    placement: Placement = field(default_factory=Placement)
    priority: int = 0
    front: bool = False
    number: float | None = None
    """An explicit `number` from the request (ComfyUI's queue position); None: the counter."""
    targets: tuple[str, ...] | None = None
    """Output nodes to run when not all of them (`partial_execution_targets` for the worker)."""


@dataclass(frozen=True)
class JobRecord:
    """A job as read back from Redis."""

    job_id: str
    state: JobState
    number: float
    priority: int
    client_id: str | None
    prompt_json: str
    extra_json: str
    outputs_json: str
    targets_json: str | None
    placement: Placement
    attempt: int
    failures: int
    worker: str | None
    enqueued_at_ms: int
    claimed_at_ms: int | None
    started_at_ms: int | None
    finished_at_ms: int | None
    error: str | None
    ledger_json: str | None = None
    """Its phase ledger (`gateway.ledger.record`), once it ended on a worker."""

    @classmethod
    def from_hash(cls, job_id: str, raw: Mapping[str, str]) -> JobRecord:
        return cls(
            job_id=job_id,
            state=JobState(raw["state"]),
            number=float(raw["number"]),
            priority=int(raw.get("priority") or 0),
            client_id=raw.get("client_id") or None,
            prompt_json=raw.get("prompt", "{}"),
            extra_json=raw.get("extra_data", "{}"),
            outputs_json=raw.get("outputs", "[]"),
            targets_json=raw.get("targets") or None,
            placement=Placement.from_json(raw.get("placement")),
            attempt=int(raw.get("attempt") or 0),
            failures=int(raw.get("failures") or 0),
            worker=raw.get("worker") or None,
            enqueued_at_ms=int(raw.get("enqueued_at_ms") or 0),
            claimed_at_ms=_opt_int(raw.get("claimed_at_ms")),
            started_at_ms=_opt_int(raw.get("started_at_ms")),
            finished_at_ms=_opt_int(raw.get("finished_at_ms")),
            error=raw.get("error") or None,
            ledger_json=raw.get("ledger") or None,
        )

    @property
    def score(self) -> float:
        """Its place in the queue, lowest first: priority, then number (as scripts.ENQUEUE)."""
        return -self.priority * 1e12 + self.number

    def with_attempt(self, attempt: int) -> JobRecord:
        return replace(self, attempt=attempt)

    def queue_item_json(self) -> str:
        """ComfyUI's queue item `[number, prompt_id, prompt, extra_data, outputs]`, as JSON text.

        Built by concatenation so the stored prompt is never re-parsed on the hot path.
        """
        number = json.dumps(display_number(self.number))
        job_id = json.dumps(self.job_id)
        return f"[{number}, {job_id}, {self.prompt_json}, {self.extra_json}, {self.outputs_json}]"

    def job_view(self) -> JobView:
        return self.placement.job_view(
            self.job_id,
            enqueued_at_ms=self.enqueued_at_ms,
            priority=self.priority,
            number=self.number,
        )


def _opt_int(text: str | None) -> int | None:
    return int(text) if text else None


def display_number(number: float) -> int | float:
    """ComfyUI answers an int `number` unless a fractional one was sent."""
    return number if number % 1 else int(number)
