"""A worker's life as typed events: the supervisor only emits them, the gateway only consumes.

Phases are what a worker is doing now; events are the transitions between them, each with the
facts a consumer needs (the exit code, whether anyone asked for the exit, the warm-up timings).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from workers.warmup.prompts import WarmupResult


class Phase(StrEnum):
    """Where one managed worker is in its life."""

    STARTING = "starting"
    """Spawned; not answering `GET /prompt` yet."""
    WARMING = "warming"
    """Answering; running the warm-up of its preload list. Not given client jobs."""
    READY = "ready"
    """Warm: may take client jobs."""
    BACKOFF = "backoff"
    """Exited; a restart is scheduled."""
    FAILED = "failed"
    """Given up (broken at start, flapping, bad launch args); waits for an operator."""
    STOPPING = "stopping"
    STOPPED = "stopped"


class LifecycleKind(StrEnum):
    SPAWNED = "spawned"
    READY = "ready"
    EXITED = "exited"
    RESTART_SCHEDULED = "restart_scheduled"
    GAVE_UP = "gave_up"
    STOPPED = "stopped"


@dataclass(frozen=True)
class WorkerEvent:
    """One transition of one worker, stamped with the supervisor's clock.

    `failure` (EXITED only): nobody asked for this exit (a crash, a start that failed, a hang
    the watchdog ended); the jobs it held count a failed attempt. An operator's restart or a
    stop is not a failure. `warmups` (READY only): the cold timings of the preload list.
    """

    kind: LifecycleKind
    worker: str
    at_s: float
    pid: int | None = None
    exit_code: int | None = None
    reason: str = ""
    failure: bool = False
    delay_s: float | None = None
    warmups: tuple[WarmupResult, ...] = ()


EventSink = Callable[[WorkerEvent], Awaitable[None]]
