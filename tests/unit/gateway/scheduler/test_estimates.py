"""estimates: a worker never measured is priced from what is known, never excluded forever."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from gateway.app import load_policy
from gateway.scheduler import cost
from gateway.scheduler.estimates import with_estimates
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView

X, Y = "sd_xl_base_1.0.safetensors", "v1-5-pruned-emaonly.safetensors"


def w(
    name: str,
    card: str | None = None,
    speed: Mapping[str, float] | None = None,
    load_s: Mapping[str, float] | None = None,
    **kw: object,
) -> WorkerView:
    return WorkerView(
        name,
        free_slots=2,
        idle_since_s=0.0,
        card=card,
        speed=dict(speed or {}),
        load_s=dict(load_s or {}),
        **kw,  # type: ignore[arg-type]
    )


def shown(farm: tuple[WorkerView, ...], name: str) -> WorkerView:
    return next(view for view in with_estimates(farm) if view.name == name)


SPEEDS = {
    "never measured, a worker of its card was": (
        (w("a", "h200", {"sdxl": 50.0}), w("b", "h200")),
        50.0,
    ),
    "its own measurement, scaled by its pace against a worker that measured both": (
        (w("a", "4070", {"sd15": 20.0, "sdxl": 5.0}), w("b", "h200", {"sd15": 80.0})),
        20.0,
    ),
    "scaled against a worker of its own card first": (
        (
            w("a", "h200", {"sd15": 80.0, "sdxl": 50.0}),
            w("d", "4070", {"sd15": 40.0, "sdxl": 4.0}),
            w("b", "h200", {"sd15": 40.0}),
        ),
        25.0,
    ),
    "an unknown card is scaled against the farm": (
        (w("a", "h200", {"sd15": 80.0, "sdxl": 50.0}), w("b", None, {"sd15": 40.0})),
        25.0,
    ),
    "nothing of its own: the mean of its card's workers": (
        (
            w("a", "h200", {"sdxl": 50.0}),
            w("c", "h200", {"sdxl": 25.0}),
            w("d", "4070", {"sdxl": 5.0}),
            w("b", "h200"),
        ),
        1.0 / ((1 / 50.0 + 1 / 25.0) / 2),
    ),
    "nothing of its own nor of its card: the mean of the farm": (
        (w("a", "h200", {"sdxl": 50.0}), w("d", "4070", {"sdxl": 5.0}), w("b", "a100")),
        1.0 / ((1 / 50.0 + 1 / 5.0) / 2),
    ),
    "a measurement is never overwritten": (
        (w("a", "h200", {"sdxl": 50.0}), w("b", "h200", {"sdxl": 10.0})),
        10.0,
    ),
    "nobody measured it: the neutral default": (
        (w("a", "h200"), w("b", "h200")),
        cost.DEFAULT_SPEED,
    ),
}


@pytest.mark.parametrize(("farm", "speed"), SPEEDS.values(), ids=SPEEDS.keys())
def test_a_worker_is_priced_from_what_is_known(farm: tuple[WorkerView, ...], speed: float) -> None:
    assert cost.speed_of(shown(farm, "b"), "sdxl") == pytest.approx(speed)


LOADS = {
    "never loaded, a worker of its card did": (
        (w("a", "h200", load_s={X: 6.0}), w("b", "h200")),
        6.0,
    ),
    "its own loads, scaled by its pace against another's": (
        (w("a", "h200", load_s={X: 6.0, Y: 3.0}), w("b", "4070", load_s={Y: 6.0})),
        12.0,
    ),
    "the mean of the farm": (
        (w("a", "h200", load_s={X: 6.0}), w("d", "4070", load_s={X: 10.0}), w("b", "a100")),
        8.0,
    ),
    "a measurement is never overwritten": (
        (w("a", "h200", load_s={X: 6.0}), w("b", "h200", load_s={X: 2.0})),
        2.0,
    ),
    "nobody loaded it: the mean of what it loaded": (
        (w("a", "h200", load_s={Y: 2.0}), w("b", "h200", load_s={Y: 6.0})),
        6.0,
    ),
    "nobody loaded anything: the neutral default": (
        (w("a", "h200"), w("b", "h200")),
        cost.DEFAULT_LOAD_S,
    ),
}


@pytest.mark.parametrize(("farm", "seconds"), LOADS.values(), ids=LOADS.keys())
def test_a_load_is_priced_from_what_is_known(farm: tuple[WorkerView, ...], seconds: float) -> None:
    assert cost.key_load_s(shown(farm, "b"), X, "sdxl") == pytest.approx(seconds)


def test_estimates_are_marked_and_give_way_to_measurement() -> None:
    a = w("a", "h200", {"sdxl": 50.0}, {X: 6.0}, fixed_s={"sdxl": 0.4})
    b = shown((a, w("b", "h200", {"sd15": 9.0})), "b")
    assert (set(b.estimated), set(b.estimated_load)) == ({"sdxl"}, {X})
    assert b.fixed_s["sdxl"] == pytest.approx(0.4)
    assert b.speed["sd15"] == 9.0
    measured = shown((a, w("b", "h200", {"sd15": 9.0, "sdxl": 20.0}, {X: 3.0})), "b")
    assert (measured.estimated, measured.estimated_load) == (frozenset(), frozenset())
    assert (measured.speed["sdxl"], measured.load_s[X]) == (20.0, 3.0)
    untouched = w("c", "h200", {"sdxl": 50.0}, {X: 6.0})
    assert with_estimates((untouched,)) == (untouched,)


def burst(count: int) -> tuple[JobView, ...]:
    return tuple(
        JobView(
            f"j{i}", 0.0, model_keys=frozenset((X,)), checkpoint=X, family="sdxl", work_units=20
        )
        for i in range(count)
    )


@pytest.mark.parametrize("policy", ["affinity", "ect_greedy", "sticky"])
def test_a_burst_uses_the_worker_never_measured(policy: str) -> None:
    """Priced at the default 1 work unit/s beside a card measured at 50, the second card of a
    farm got no job of a burst (each 0.9 s on the first), so it was never measured."""
    load_s = {X: 3.0, "sdxl": 3.0}
    known = w("a", "h200", {"sdxl": 50.0}, load_s, fixed_s={"sdxl": 0.5}, resident=(X,))
    fresh = w("b", "h200")
    placed = load_policy(policy).assign(Snapshot(1.0, burst(10), with_estimates((known, fresh))))
    assert {a.worker for a in placed} == {"a", "b"}
