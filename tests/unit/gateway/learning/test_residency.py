"""residency: what an instance holds, inferred from what it ran."""

from __future__ import annotations

import pytest

from gateway.learning.residency import (
    Evidence,
    after_prompt,
    surprised,
    was_resident,
    within_memory,
)

A, B = frozenset({"a"}), frozenset({"b"})


@pytest.mark.parametrize(
    ("evidence", "resident"),
    [
        (Evidence(A, loader_cached=True), True),
        (Evidence(A, loader_cached=False, load_s=0.0, expected_load_s=5.0), False),
        (Evidence(A, load_s=0.1, expected_load_s=5.0), True),
        (Evidence(A, load_s=4.0, expected_load_s=5.0), False),
        (Evidence(A), None),
    ],
)
def test_evidence_tells_whether_the_models_were_resident(
    evidence: Evidence, resident: bool | None
) -> None:
    assert was_resident(evidence) is resident


def test_classic_cache_holds_the_last_prompt_lru_holds_more() -> None:
    assert after_prompt(("a",), Evidence(B), slots=1) == ("b",)
    assert after_prompt(("a",), Evidence(B), slots=8) == ("b", "a")


def test_a_cached_loader_we_thought_evicted_is_a_surprise() -> None:
    assert surprised(("b",), Evidence(A, loader_cached=True))
    assert not surprised(("a",), Evidence(A, loader_cached=True))


def test_memory_bounds_the_belief() -> None:
    sizes = {"a": 6600.0, "b": 6600.0, "c": 2000.0}
    assert within_memory(("a", "b", "c"), sizes, 12000.0) == ("a",)
    assert within_memory(("c", "a", "b"), sizes, 12000.0) == ("c", "a")
    assert within_memory(("a", "b"), sizes, None) == ("a", "b")
