"""cost: the seconds every policy reasons with."""

from __future__ import annotations

import pytest

from gateway.scheduler import cost
from gateway.scheduler.snapshot import WorkerView
from tests.unit.gateway.scheduler.factories import job, worker
from workers.comfy.families import TYPICAL_GB


def test_a_job_needs_its_loader_files_else_its_checkpoint() -> None:
    assert cost.models_of(job("a", "m1")) == {"m1"}
    assert cost.models_of(job("a", "m1", model_keys=frozenset({"m1", "lora"}))) == {"m1", "lora"}


@pytest.mark.parametrize(
    ("eligible", "group", "ok"),
    [
        (None, None, True),
        (frozenset({"w"}), None, True),
        (frozenset({"x"}), None, False),
        (None, "default", True),
        (None, "fp16", False),
    ],
)
def test_eligibility_follows_the_set_and_the_group(
    eligible: frozenset[str] | None, group: str | None, ok: bool
) -> None:
    assert cost.can_run(job("a", "m", eligible=eligible, group=group), worker("w")) is ok


def test_warm_seconds_are_fixed_plus_work_over_speed() -> None:
    w = worker("w", speed=5.0, fixed_s={"sd15": 0.5})
    assert cost.run_s(job("a", "m", work=10.0), w) == pytest.approx(2.5)


def test_an_unmeasured_family_gets_the_mean_of_the_known_ones() -> None:
    w = worker("w").__class__(name="w", speed={"sd15": 4.0, "sdxl": 8.0})
    assert cost.speed_of(w, "flux") == pytest.approx(6.0)


def test_load_counts_only_what_is_not_resident_by_key_then_family() -> None:
    w = worker("w", load_s=3.0).__class__(name="w", load_s={"m1": 1.0, "sd15": 3.0})
    assert cost.load_s(job("a", "m1"), w, ()) == 1.0
    assert cost.load_s(job("a", "m2"), w, ()) == 3.0
    assert cost.load_s(job("a", "m2"), w, ("m2",)) == 0.0
    # a family it never loaded: its other families' loads scaled by what each loads; a
    # family of unknown size: the mean of what it did load; nothing loaded: the default
    flux_s = 3.0 * TYPICAL_GB["flux"] / TYPICAL_GB["sd15"]
    assert cost.load_s(job("a", "f1", family="flux"), w, ()) == pytest.approx(flux_s)
    assert cost.load_s(job("a", "f1", family="other"), w, ()) == 2.0
    assert cost.load_s(job("a", "f1", family="flux"), WorkerView("x"), ()) == cost.DEFAULT_LOAD_S


@pytest.mark.parametrize(
    ("known", "family", "expected_s"),
    [
        ({"sd15": 1.5}, "sdxl", 1.5 * 6.9 / 2.1),  # an SDXL file is about 3x an SD1.5 one
        ({"sdxl": 6.9}, "sd15", 2.1),
        ({"sd15": 2.1, "sdxl": 13.8}, "flux", (17.2 + 34.4) / 2),  # the mean of both scalings
        ({"v1-5.safetensors": 1.5}, "sdxl", 1.5),  # keys only: their mean, as before
    ],
)
def test_an_unmeasured_familys_load_scales_with_the_gigabytes_it_loads(
    known: dict[str, float], family: str, expected_s: float
) -> None:
    w = WorkerView("w", load_s=known)
    assert cost.key_load_s(w, "new.safetensors", family) == pytest.approx(expected_s)


@pytest.mark.parametrize(
    ("resident", "models", "slots", "after"),
    [
        ((), {"a"}, 1, ("a",)),
        (("a",), {"b"}, 1, ("b",)),
        (("a", "b"), {"b"}, 2, ("b", "a")),
        (("a", "b"), {"c"}, 2, ("c", "a")),
        (("a",), {"b", "c"}, 1, ("b", "c")),
    ],
)
def test_touch_keeps_the_most_recent_models(
    resident: tuple[str, ...], models: set[str], slots: int, after: tuple[str, ...]
) -> None:
    assert cost.touch(resident, frozenset(models), slots) == after


def test_evicted_is_what_falls_out() -> None:
    assert cost.evicted(("a", "b"), frozenset({"c"}), 2) == {"b"}
    assert cost.evicted(("a",), frozenset({"a"}), 1) == frozenset()


def test_completion_waits_for_the_queue_and_loads_behind_it() -> None:
    w = worker("w", resident=("a",), outstanding_s=3.0, queued=(frozenset({"b"}),))
    # After the queued job the worker holds b, so a job on a must load it again.
    assert cost.resident_after_queue(w) == ("b",)
    assert cost.completion_s(job("x", "a"), w) == pytest.approx(3.0 + 4.0 + 1.0)
