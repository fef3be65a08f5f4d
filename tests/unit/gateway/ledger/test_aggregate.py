"""Ledgers summed per key, and the diagnostic rule."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.ledger.aggregate import by, diagnose, percentile, stats
from gateway.ledger.record import PHASES


def ledger(worker: str, exec_s: float, *, job: int, shape: str = "s1", **phases: float) -> Any:
    spread = {p: 0.0 for p in PHASES}
    spread.update(phases)
    spread["other"] += max(exec_s - sum(spread.values()), 0.0)
    return {
        "worker": worker,
        "group": f"g-{worker}",
        "family": "sdxl",
        "shape": shape,
        "state": "success",
        "timed": True,
        "cold": job == 1,
        "process_job": job,
        "exec_s": exec_s,
        "total_s": exec_s + 0.01,
        "queue_s": 0.005,
        "dispatch_s": 0.005,
        "phases": spread,
    }


def test_percentiles_and_stats() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert percentile([1.0, 2.0], 0.95) == pytest.approx(1.95)
    assert stats([]) == {"n": 0}
    assert stats([1.0, 3.0]) == {"n": 2, "mean": 2.0, "median": 2.0, "p95": 2.9}


def test_cold_and_warm_are_summed_apart_per_group() -> None:
    ledgers = [
        ledger("a", 10.0, job=1, load=6.0, sample=3.0),
        ledger("a", 2.0, job=2, sample=1.5),
        ledger("a", 4.0, job=3, sample=3.5),
        ledger("b", 3.0, job=2, sample=2.0),
        {**ledger("b", 99.0, job=3), "state": "error"},
        {**ledger("b", 99.0, job=4), "timed": False},
    ]
    table = by(ledgers, "group")
    assert set(table) == {"g-a", "g-b"}
    assert table["g-a"]["cold"]["exec_s"]["n"] == 1
    assert table["g-a"]["cold"]["load"]["mean"] == 6.0
    assert table["g-a"]["warm"]["exec_s"] == {"n": 2, "mean": 3.0, "median": 3.0, "p95": 3.9}
    assert table["g-a"]["warm"]["sample"]["median"] == 2.5
    assert table["g-b"]["warm"]["exec_s"]["n"] == 1  # the failed and the untimed job left out
    assert table["g-b"]["cold"]["exec_s"] == {"n": 0}
    with pytest.raises(ValueError, match="sum up by"):
        by(ledgers, "colour")


def test_a_first_job_dominated_by_one_time_cost() -> None:
    # the seed figures' first frame: 41.6 s, then 4.6 s warm frames
    ledgers = [ledger("a", 41.6, job=1, load=30.0), *(ledger("a", 4.6, job=n) for n in (2, 3))]
    [finding] = diagnose(ledgers)
    assert finding["verdict"] == "one_time_cost"
    assert finding["one_time_share"] == pytest.approx((41.6 - 4.6) / 41.6, abs=1e-4)
    assert "load" in finding["hint"] and "preload" in finding["hint"]


def test_slow_warm_jobs_point_at_the_per_frame_path() -> None:
    # 41.6 s then 14.8 s on one card, 13.4 s then 4.6 s on another
    ledgers = [
        ledger("slow", 41.6, job=1),
        *(ledger("slow", 14.8, job=n, sample=12.0) for n in (2, 3)),
        ledger("fast", 13.4, job=1),
        *(ledger("fast", 4.6, job=n, sample=4.0) for n in (2, 3)),
    ]
    findings = {f["worker"]: f for f in diagnose(ledgers)}
    slow = findings["slow"]
    assert slow["verdict"] == "slow_per_frame"
    assert slow["best_worker"] == "fast" and slow["next_s"] == 14.8
    assert "sample leads" in slow["hint"]
    assert findings["fast"]["verdict"] == "ok"


def test_no_rule_without_a_first_and_a_warm_job() -> None:
    [finding] = diagnose([ledger("a", 3.0, job=2)])
    assert finding["verdict"] == "unknown"
