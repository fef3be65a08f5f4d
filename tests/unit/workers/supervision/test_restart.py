"""Restart policy: backoff, reset after a stable run, broken at start, flapping."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from workers.supervision.restart import (
    DEFAULT_SETTINGS,
    ExitKind,
    ExitRecord,
    GiveUp,
    GiveUpCause,
    Restart,
    RestartSettings,
    backoff_s,
    describe_exit,
    failure_streak,
    next_restart,
    prune_history,
)


def runs(*spans: tuple[float, float, bool]) -> list[ExitRecord]:
    """Records from (started_at_s, run_s, became_ready) spans, exit code 1."""
    return [ExitRecord(start, start + run, ready, 1) for start, run, ready in spans]


def crash_loop(count: int, *, run_s: float, gap_s: float, ready: bool = True) -> list[ExitRecord]:
    """`count` runs of `run_s` seconds, each started `gap_s` after the previous exit."""
    records: list[ExitRecord] = []
    start = 0.0
    for _ in range(count):
        records.append(ExitRecord(start, start + run_s, ready, 1))
        start += run_s + gap_s
    return records


def case(*values: object, id: str, settings: RestartSettings = DEFAULT_SETTINGS) -> object:
    """A table row: `values`, then the settings the policy decides under."""
    return pytest.param(*values, settings, id=id)


RESTARTS = [
    # (history, now_s, expected delay_s, attempt, cause), under the default settings unless given
    case(runs((0, 3600, True)), 3600, 1.0, 1, ExitKind.CRASH, id="crash-after-long-run"),
    case(runs((0, 5, False)), 5, 1.0, 1, ExitKind.START_FAILURE, id="first-start-failure"),
    case(runs((0, 5, False), (6, 5, False)), 11, 2.0, 2, ExitKind.START_FAILURE, id="second-start"),
    case(
        runs((0, 5, False), (6, 5, False), (13, 60, True)),
        73,
        4.0,
        3,
        ExitKind.CRASH,
        id="ready-run-breaks-the-start-failure-run",
    ),
    case(
        runs((0, 20, True), (21, 20, True), (43, 20, True), (67, 20, True)),
        87,
        8.0,
        4,
        ExitKind.CRASH,
        id="four-quick-crashes-double-the-delay",
    ),
    case(
        runs((0, 20, True), (21, 20, True), (43, 400, True)),
        443,
        1.0,
        1,
        ExitKind.CRASH,
        id="stable-run-resets-the-backoff",
    ),
    case(
        runs((0, 20, True), (100, 400, True), (501, 20, True)),
        521,
        2.0,
        2,
        ExitKind.CRASH,
        id="quick-crash-after-a-stable-run-is-the-second-failure",
    ),
    case(
        runs((0, 400, True), (401, 5, False)),
        406,
        2.0,
        2,
        ExitKind.START_FAILURE,
        id="start-failure-after-a-stable-run",
    ),
    case(crash_loop(12, run_s=100, gap_s=60), 1860, 60.0, 12, ExitKind.CRASH, id="backoff-capped"),
    case(runs((0, 3600, True)), 3600.4, 0.6, 1, ExitKind.CRASH, id="delay-counts-from-now"),
    case(runs((0, 3600, True)), 3700, 0.0, 1, ExitKind.CRASH, id="overdue-restart-is-now"),
    case(
        crash_loop(5, run_s=30, gap_s=1),  # exits at 30, 61, 92, 123, 154
        154,
        16.0,
        5,
        ExitKind.CRASH,
        id="exits-spread-wider-than-the-window-do-not-flap",
    ),
    case(
        crash_loop(5, run_s=5, gap_s=1),  # exits at 5, 11, 17, 23, 29
        40,
        5.0,
        5,
        ExitKind.CRASH,
        id="the-flapping-window-ends-at-now-not-at-the-exit",
        settings=RestartSettings(flap_window_s=30),
    ),
    case(
        runs((0, 5, False), (6, 5, False), (13, 5, False)),
        18,
        4.5,
        3,
        ExitKind.START_FAILURE,
        id="custom-backoff-and-start-failure-limit",
        settings=RestartSettings(
            backoff_initial_s=0.5, backoff_factor=3, backoff_max_s=10, max_start_failures=5
        ),
    ),
]


@pytest.mark.parametrize(("history", "now_s", "delay_s", "attempt", "cause", "settings"), RESTARTS)
def test_a_worker_is_restarted_after_its_backoff(
    history: list[ExitRecord],
    now_s: float,
    delay_s: float,
    attempt: int,
    cause: ExitKind,
    settings: RestartSettings,
) -> None:
    decision = next_restart(history, now_s, settings)

    assert isinstance(decision, Restart)
    assert decision.delay_s == pytest.approx(delay_s)
    assert decision.attempt == attempt
    assert decision.cause is cause
    assert decision.restart_at_s == pytest.approx(history[-1].exited_at_s + decision.backoff_s)


GIVE_UPS = [
    # (history, now_s, cause), under the default settings unless given
    case(
        runs((0, 5, False), (6, 5, False), (13, 5, False)),
        18,
        GiveUpCause.BROKEN_AT_START,
        id="three-start-failures",
    ),
    case(
        runs((0, 900, True), (901, 30, False), (933, 30, False), (967, 30, False)),
        997,
        GiveUpCause.BROKEN_AT_START,
        id="worked-once-then-broken-at-start",
    ),
    case(
        runs((0, 5, False), (6, 5, False), (13, 5, False), (22, 5, False), (35, 5, False)),
        40,
        GiveUpCause.BROKEN_AT_START,
        id="broken-at-start-wins-over-flapping",
    ),
    case(
        runs((0, 5, True), (6, 5, True), (13, 5, True), (22, 5, True), (35, 5, True)),
        40,
        GiveUpCause.FLAPPING,
        id="five-crashes-in-40-s",
    ),
    case(
        runs(
            (0, 400, True),
            (401, 5, True),
            (407, 5, True),
            (414, 5, True),
            (423, 5, True),
            (436, 5, True),
        ),
        441,
        GiveUpCause.FLAPPING,
        id="flapping-after-a-stable-run",
    ),
    case(
        runs((0, 5, True), (6, 5, False), (13, 5, True), (22, 5, False), (35, 5, True)),
        40,
        GiveUpCause.FLAPPING,
        id="mixed-exits-flap",
    ),
    case(
        crash_loop(5, run_s=5, gap_s=1),  # exits at 5, 11, 17, 23, 29
        29,
        GiveUpCause.FLAPPING,
        id="five-exits-in-a-short-window-ending-now",
        settings=RestartSettings(flap_window_s=30),
    ),
]


@pytest.mark.parametrize(("history", "now_s", "cause", "settings"), GIVE_UPS)
def test_a_broken_or_flapping_worker_is_given_up(
    history: list[ExitRecord], now_s: float, cause: GiveUpCause, settings: RestartSettings
) -> None:
    decision = next_restart(history, now_s, settings)

    assert isinstance(decision, GiveUp)
    assert decision.cause is cause
    assert decision.reason.startswith(cause.replace("_", " "))


def test_the_history_may_come_in_any_order() -> None:
    history = runs((0, 20, True), (21, 20, True), (43, 400, True), (444, 5, True))
    shuffled = [history[2], history[0], history[3], history[1]]

    assert next_restart(shuffled, 449) == next_restart(history, 449)


def test_reasons_name_the_exit() -> None:
    crashed = [ExitRecord(0, 12.5, True, -9)]
    broken = [ExitRecord(t, t + 2, False, 2) for t in (0, 10, 20)]

    restart = next_restart(crashed, 12.5)
    give_up = next_restart(broken, 22)

    assert "crashed (killed by SIGKILL after 12.5 s)" in restart.reason
    assert "exit code 2 after 2.0 s" in give_up.reason


def test_an_empty_history_is_refused() -> None:
    with pytest.raises(ValueError, match="no exit"):
        next_restart([], 0)


@pytest.mark.parametrize(
    ("attempt", "expected_s"),
    [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 60), (8, 60), (10_000, 60)],
)
def test_backoff_doubles_up_to_its_cap(attempt: int, expected_s: float) -> None:
    assert backoff_s(attempt) == expected_s


def test_backoff_needs_a_positive_attempt() -> None:
    with pytest.raises(ValueError, match="attempt"):
        backoff_s(0)


@pytest.mark.parametrize(
    ("history", "streak"),
    [
        (runs((0, 400, True)), 1),
        (runs((0, 5, False), (6, 5, False)), 2),
        (runs((0, 5, True), (6, 400, True), (407, 5, True), (413, 5, False)), 3),
        (runs((0, 299, True), (300, 299, True)), 2),
        (runs((0, 300, False), (301, 5, True)), 2),  # long but never ready: not stable
    ],
)
def test_the_failure_streak_runs_back_to_the_last_stable_run(
    history: list[ExitRecord], streak: int
) -> None:
    assert failure_streak(history, RestartSettings()) == streak


@pytest.mark.parametrize(
    ("exit_code", "words"),
    [
        (None, "exit code unknown"),
        (0, "exit code 0"),
        (1, "exit code 1"),
        (-9, "killed by SIGKILL"),
        (-15, "killed by SIGTERM"),
        (-200, "killed by signal 200"),
    ],
)
def test_an_exit_reads_as_words(exit_code: int | None, words: str) -> None:
    assert describe_exit(exit_code) == words


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"backoff_initial_s": 0}, "backoff_initial_s must be positive"),
        ({"stable_after_s": -1}, "stable_after_s must be positive"),
        ({"flap_window_s": 0}, "flap_window_s must be positive"),
        ({"max_start_failures": 0}, "max_start_failures must be at least 1"),
        ({"flap_exits": 0}, "flap_exits must be at least 1"),
        ({"backoff_factor": 0.5}, "backoff_factor must be at least 1"),
        ({"backoff_max_s": 0.5}, "backoff_max_s"),
    ],
)
def test_unworkable_settings_are_refused(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RestartSettings(**changes)  # type: ignore[arg-type]


def random_history(rng: random.Random) -> list[ExitRecord]:
    records: list[ExitRecord] = []
    start = 0.0
    for _ in range(rng.randrange(1, 40)):
        run_s = rng.choice([1.0, 10.0, 50.0, 400.0, 2000.0])
        ready = rng.random() < 0.8
        records.append(ExitRecord(start, start + run_s, ready, rng.choice([1, -9, None])))
        start += run_s + rng.choice([0.0, 1.0, 30.0, 200.0])
    return records


def same_decision(left: Restart | GiveUp, right: Restart | GiveUp) -> bool:
    if isinstance(left, GiveUp) or isinstance(right, GiveUp):
        return left == right
    return (left.restart_at_s, left.cause) == (right.restart_at_s, right.cause)


@pytest.mark.parametrize("settings", [RestartSettings(), RestartSettings(backoff_factor=1)])
def test_a_pruned_history_decides_as_the_whole_one(settings: RestartSettings) -> None:
    rng = random.Random(7)
    for _ in range(300):
        history = random_history(rng)
        now_s = history[-1].exited_at_s + rng.choice([0.0, 5.0, 500.0])
        pruned = prune_history(history, now_s, settings)
        later_s = now_s + 30

        assert same_decision(
            next_restart(pruned, now_s, settings), next_restart(history, now_s, settings)
        )
        assert same_decision(
            next_restart(pruned, later_s, settings), next_restart(history, later_s, settings)
        )


def test_pruning_keeps_a_long_history_short() -> None:
    history: Sequence[ExitRecord] = crash_loop(1000, run_s=100, gap_s=60)

    pruned = prune_history(history, history[-1].exited_at_s)

    assert len(pruned) == 7  # the streak up to the 60 s cap; no exit else in the window
    assert pruned[-1] == history[-1]
