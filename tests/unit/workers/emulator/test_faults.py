"""The fault state: parsing, validation, counting down, expiry (see workers.emulator.faults)."""

from __future__ import annotations

from typing import Any

import pytest

from workers.emulator.faults import FaultError, Faults, PromptFaults, parse_cli


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_cli_pairs_read_json_values_or_strings() -> None:
    assert parse_cli(
        ["crash_at_step=3", "fail_node=KSampler", "fail_validation=true", "refuse=503"]
    ) == {
        "crash_at_step": 3,
        "fail_node": "KSampler",
        "fail_validation": True,
        "refuse": 503,
    }
    with pytest.raises(FaultError):
        parse_cli(["no-equals"])


@pytest.mark.parametrize(
    "body",
    [
        {"crash_at_step": -1},
        {"crash_at_step": 1.5},
        {"hang_s": "long"},
        {"slow_factor": 0},
        {"refuse": "maybe"},
        {"fail_validation": 1},
        {"times": 0},
        {"unknown": 1},
        ["not", "an", "object"],
    ],
)
def test_bad_requests_change_nothing(body: Any) -> None:
    faults = Faults()
    faults.update({"hang_s": 1})
    with pytest.raises(FaultError):
        faults.update(body)
    assert faults.snapshot()["armed"] == {"hang_s": {"value": 1.0, "times": 1}}


def test_one_shot_faults_apply_to_the_next_prompts_only() -> None:
    faults = Faults()
    faults.update({"fail_node": 3, "fail_message": "boom", "times": 2})
    expected = PromptFaults(fail_node="3", fail_message="boom")
    assert [faults.take_for_prompt() for _ in range(3)] == [
        expected,
        expected,
        PromptFaults(fail_message="boom"),
    ]


def test_validation_failures_count_requests() -> None:
    faults = Faults()
    faults.update({"fail_validation": True})
    assert [faults.take_validation_failure(), faults.take_validation_failure()] == [True, False]


def test_refusal_expires_and_null_disarms() -> None:
    clock = Clock()
    faults = Faults(clock)
    faults.update({"refuse": "close", "refuse_for_s": 2, "slow_factor": 3, "hang_s": 1})
    assert (faults.refusing(), faults.slow_factor) == ("close", 3.0)
    clock.now += 2.5
    assert faults.refusing() is None
    faults.update({"hang_s": None, "slow_factor": None})
    assert (faults.snapshot()["armed"], faults.slow_factor) == ({}, 1.0)


def test_clear_in_the_same_request_applies_first() -> None:
    faults = Faults()
    faults.update({"hang_s": 1, "refuse": "503"})
    faults.update({"clear": True, "stall_ws_s": 2})
    snapshot = faults.snapshot()
    assert snapshot["armed"] == {"stall_ws_s": {"value": 2.0, "times": 1}}
    assert snapshot["refuse"] is None
