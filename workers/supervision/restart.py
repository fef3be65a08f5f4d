"""When to restart a worker that exited, and when to stop trying.

Pure: `next_restart(exits, now_s, settings)` looks only at the worker's exit history and the
time it is given; the supervisor owns the waiting, the spawning and the bookkeeping.

Three rules, checked in this order:

1. Broken at start: the last `max_start_failures` runs all exited before the worker ever became
   ready. The launch itself is broken (bad args, missing files, CUDA unusable) and will fail the
   same way every time, as uvicorn's STARTUP_FAILURE: give up.
2. Flapping: `flap_exits` exits within the last `flap_window_s` seconds, whatever the runs did
   (circus's flapping plugin): give up rather than restart forever.
3. Otherwise restart after an exponential backoff (`backoff_initial_s`, times
   `backoff_factor` per failure in a row, at most `backoff_max_s`), counted since the last exit.
   A run that was ready for `stable_after_s` seconds resets the count.

Exits the gateway excuses (the run crashed on a prompt it then quarantined as poison) count for
none of these rules: after one the worker restarts after `backoff_initial_s`.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class ExitKind(StrEnum):
    """How a run ended, as far as restarting is concerned."""

    START_FAILURE = "start_failure"
    """It exited (or was stopped for not answering) before it ever became ready."""
    CRASH = "crash"
    """It became ready, then exited without being asked to."""


class GiveUpCause(StrEnum):
    """Why the policy stopped restarting a worker (the worker is then `failed`)."""

    BROKEN_AT_START = "broken_at_start"
    FLAPPING = "flapping"


@dataclass(frozen=True)
class ExitRecord:
    """One run of a worker that ended without the supervisor asking it to.

    Times are seconds on the supervisor's clock (monotonic). `exit_code` is the process's
    return code: negative for a signal (as `subprocess` reports it), None when unknown. A run
    the supervisor killed because it was not ready in time is a run with `became_ready=False`.
    """

    started_at_s: float
    exited_at_s: float
    became_ready: bool
    exit_code: int | None
    job: str | None = None
    """The prompt the gateway blames for this exit (the one the run was running)."""
    excused: bool = False
    """The gateway quarantined `job` as poison: the worker is not to blame for this exit."""

    @property
    def run_s(self) -> float:
        """Seconds from start to exit (0 if the clock says otherwise)."""
        return max(0.0, self.exited_at_s - self.started_at_s)

    @property
    def kind(self) -> ExitKind:
        return ExitKind.CRASH if self.became_ready else ExitKind.START_FAILURE


@dataclass(frozen=True)
class RestartSettings:
    """Backoff, reset, broken-at-start and flapping thresholds (defaults suit ComfyUI, whose
    start takes about 15 s on an H200).

    Raises ValueError for settings that cannot work (non-positive times or counts, a factor
    below 1, a cap below the first delay).
    """

    backoff_initial_s: float = 1.0
    backoff_factor: float = 2.0
    backoff_max_s: float = 60.0
    stable_after_s: float = 300.0
    max_start_failures: int = 3
    flap_exits: int = 5
    flap_window_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("backoff_initial_s", "stable_after_s", "flap_window_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("max_start_failures", "flap_exits"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.backoff_factor < 1:
            raise ValueError(f"backoff_factor must be at least 1, got {self.backoff_factor}")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff_max_s ({self.backoff_max_s}) is below "
                f"backoff_initial_s ({self.backoff_initial_s})"
            )


DEFAULT_SETTINGS = RestartSettings()


@dataclass(frozen=True)
class Restart:
    """Start the worker again at `restart_at_s` (that is, `delay_s` after `now_s`).

    `attempt` counts the failures in a row, this one included (1 after a stable run);
    `backoff_s` is the full backoff for that attempt, measured from the last exit.
    """

    restart_at_s: float
    delay_s: float
    backoff_s: float
    attempt: int
    cause: ExitKind
    reason: str


@dataclass(frozen=True)
class GiveUp:
    """Do not restart: mark the worker `failed` and show `reason` to the operator."""

    cause: GiveUpCause
    reason: str


Decision = Restart | GiveUp


def next_restart(
    exits: Sequence[ExitRecord], now_s: float, settings: RestartSettings = DEFAULT_SETTINGS
) -> Decision:
    """Decide what to do after the latest exit in `exits` (any order; only ended runs).

    Returns GiveUp when the worker is broken at start or flapping, else Restart with its
    backoff. Raises ValueError when `exits` is empty (there is nothing to decide).
    """
    if not exits:
        raise ValueError("no exit to decide on")
    latest = max(exits, key=lambda record: record.exited_at_s)
    if latest.excused:
        return _excused_restart(latest, now_s, settings)
    ordered = sorted(_counted(exits), key=lambda record: record.exited_at_s)
    verdict = _broken_at_start(ordered, settings) or _flapping(ordered, now_s, settings)
    if verdict is not None:
        return verdict
    return _restart(ordered, now_s, settings)


def backoff_s(attempt: int, settings: RestartSettings = DEFAULT_SETTINGS) -> float:
    """The delay before restart number `attempt` (1-based) of a failure streak, capped."""
    if attempt < 1:
        raise ValueError(f"attempt must be at least 1, got {attempt}")
    # The cap bounds the exponent too, so a long streak cannot overflow the float.
    delay_s = settings.backoff_initial_s
    for _ in range(attempt - 1):
        delay_s *= settings.backoff_factor
        if delay_s >= settings.backoff_max_s:
            return settings.backoff_max_s
    return min(delay_s, settings.backoff_max_s)


def describe_exit(exit_code: int | None) -> str:
    """A process's end in words: "exit code 1", "killed by SIGKILL", "exit code unknown"."""
    if exit_code is None:
        return "exit code unknown"
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exit code {exit_code}"


def is_stable(record: ExitRecord, settings: RestartSettings = DEFAULT_SETTINGS) -> bool:
    """A run that became ready and lasted `stable_after_s`: it resets the backoff."""
    return record.became_ready and record.run_s >= settings.stable_after_s


def failure_streak(
    ordered: Sequence[ExitRecord], settings: RestartSettings = DEFAULT_SETTINGS
) -> int:
    """Failures in a row up to the latest exit (oldest first): back to and including the
    latest stable run, so an exit after a stable run counts 1."""
    streak = 0
    for record in reversed(ordered):
        streak += 1
        if is_stable(record, settings):
            break
    return streak


def prune_history(
    exits: Sequence[ExitRecord], now_s: float, settings: RestartSettings = DEFAULT_SETTINGS
) -> tuple[ExitRecord, ...]:
    """The records that can still change a decision at `now_s` or later, oldest first.

    Keeps the exits inside the flapping window and enough of the latest ones to count the
    broken-at-start run and the backoff up to its cap, so `next_restart` gives the same action,
    cause and delay on the pruned history as on the whole one (only `Restart.attempt` may then
    count fewer failures, never fewer than the cap needs). The supervisor keeps its history
    bounded with it.
    """
    latest = max(exits, key=lambda record: record.exited_at_s, default=None)
    ordered = sorted(_counted(exits), key=lambda record: record.exited_at_s)
    keep = max(settings.max_start_failures, _attempts_to_cap(settings))
    since_s = now_s - settings.flap_window_s
    cut = max(0, len(ordered) - keep)
    while cut > 0 and ordered[cut - 1].exited_at_s >= since_s:
        cut -= 1
    kept = ordered[cut:]
    if latest is not None and latest.excused:
        kept.append(latest)  # the decision after it looks at it alone
    return tuple(kept)


def _counted(exits: Sequence[ExitRecord]) -> list[ExitRecord]:
    return [record for record in exits if not record.excused]


def _excused_restart(latest: ExitRecord, now_s: float, settings: RestartSettings) -> Restart:
    delay_s = settings.backoff_initial_s
    restart_at_s = latest.exited_at_s + delay_s
    reason = (
        f"crashed on prompt {latest.job}, quarantined as poison ({describe_exit(latest.exit_code)}"
        f" after {latest.run_s:.1f} s); not counted against the worker, restarting {delay_s:g} s"
        " after the exit"
    )
    return Restart(
        restart_at_s=restart_at_s,
        delay_s=max(0.0, restart_at_s - now_s),
        backoff_s=delay_s,
        attempt=1,
        cause=latest.kind,
        reason=reason,
    )


def _attempts_to_cap(settings: RestartSettings) -> int:
    """The first attempt whose backoff is the cap (a streak longer than this changes nothing);
    with a factor of 1 the backoff never grows, so one attempt is enough."""
    if settings.backoff_factor == 1:
        return 1
    attempt = 1
    while backoff_s(attempt, settings) < settings.backoff_max_s:
        attempt += 1
    return attempt


def _broken_at_start(ordered: Sequence[ExitRecord], settings: RestartSettings) -> GiveUp | None:
    limit = settings.max_start_failures
    last = ordered[-limit:]
    if len(last) < limit or any(record.became_ready for record in last):
        return None
    reason = (
        f"broken at start: exited {limit} times in a row before becoming ready "
        f"(last: {describe_exit(last[-1].exit_code)} after {last[-1].run_s:.1f} s); "
        "check the launch args and the worker log"
    )
    return GiveUp(GiveUpCause.BROKEN_AT_START, reason)


def _flapping(
    ordered: Sequence[ExitRecord], now_s: float, settings: RestartSettings
) -> GiveUp | None:
    since_s = now_s - settings.flap_window_s
    recent = [record for record in ordered if record.exited_at_s >= since_s]
    if len(recent) < settings.flap_exits:
        return None
    reason = (
        f"flapping: {len(recent)} exits within {settings.flap_window_s:g} s "
        f"(last: {describe_exit(recent[-1].exit_code)} after {recent[-1].run_s:.1f} s); "
        "check the worker log"
    )
    return GiveUp(GiveUpCause.FLAPPING, reason)


def _restart(ordered: Sequence[ExitRecord], now_s: float, settings: RestartSettings) -> Restart:
    last = ordered[-1]
    attempt = failure_streak(ordered, settings)
    delay_s = backoff_s(attempt, settings)
    restart_at_s = last.exited_at_s + delay_s
    what = "crashed" if last.became_ready else "failed to start"
    reason = (
        f"{what} ({describe_exit(last.exit_code)} after {last.run_s:.1f} s); "
        f"restarting {delay_s:g} s after the exit (failure {attempt} in a row)"
    )
    return Restart(
        restart_at_s=restart_at_s,
        delay_s=max(0.0, restart_at_s - now_s),
        backoff_s=delay_s,
        attempt=attempt,
        cause=last.kind,
        reason=reason,
    )
