"""What `Metrics` counts when the gateway's parts report: table-driven, on a registry per test."""

from __future__ import annotations

import pytest

from gateway.jobs.models import JobRecord, JobState, Placement
from gateway.metrics.recorded import JobLatency, Metrics, reason_label

NOW_MS = 100_000


def record(**stamps: int | None) -> JobRecord:
    values: dict[str, int | None] = {
        "enqueued_at_ms": 90_000,
        "claimed_at_ms": 92_000,
        "started_at_ms": 93_000,
        "finished_at_ms": None,
        **stamps,
    }
    return JobRecord(
        job_id="j1", state=JobState.RUNNING, number=1, priority=0, client_id="c1",
        prompt_json="{}", extra_json="{}", outputs_json="[]", targets_json=None,
        placement=Placement(checkpoint="sdxl_c.safetensors"), attempt=1, failures=0,
        worker="w0", error=None, enqueued_at_ms=values["enqueued_at_ms"] or 0,
        claimed_at_ms=values["claimed_at_ms"], started_at_ms=values["started_at_ms"],
        finished_at_ms=values["finished_at_ms"],
    )  # fmt: skip


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        ({}, JobLatency(2.0, 7.0, 10.0)),
        ({"started_at_ms": None}, JobLatency(2.0, None, 10.0)),
        ({"claimed_at_ms": None, "started_at_ms": None}, JobLatency(None, None, 10.0)),
        ({"claimed_at_ms": 80_000}, JobLatency(0.0, 7.0, 10.0)),  # clocks of two nodes
    ],
)
def test_latencies_come_from_the_records_timestamps(
    stamps: dict[str, int | None], expected: JobLatency
) -> None:
    assert JobLatency.of(record(**stamps), NOW_MS) == expected


@pytest.mark.parametrize(
    ("outcome", "label"),
    [
        ("stalled", "stalled"),
        ("crashed its worker", "crashed its worker"),
        ("taken back for sim3", "taken back"),
        ("something new", "other"),
    ],
)
def test_requeue_reasons_are_a_bounded_set(outcome: str, label: str) -> None:
    assert reason_label(outcome) == label


def test_an_ended_job_is_counted_and_its_latencies_observed() -> None:
    metrics = Metrics(now_ms=lambda: NOW_MS)
    metrics.job_ended(record(), JobState.SUCCESS, "w0", "fast")
    labels = {"worker": "w0", "group": "fast", "family": "sdxl"}
    assert sample(metrics, "comfy_gateway_jobs_finished_total", outcome="success", **labels) == 1
    assert sample(metrics, "comfy_gateway_execution_seconds_sum", **labels) == 7.0
    assert sample(metrics, "comfy_gateway_queue_wait_seconds_count", **labels) == 1
    assert sample(metrics, "comfy_gateway_job_seconds_bucket", le="10.0", **labels) == 1
    assert sample(metrics, "comfy_gateway_job_seconds_bucket", le="5.0", **labels) == 0
    assert [(f.outcome, f.seconds.total_s) for f in metrics.recent] == [("success", 10.0)]


def test_a_cancelled_job_is_counted_but_times_nothing() -> None:
    metrics = Metrics(now_ms=lambda: NOW_MS)
    metrics.job_ended(record(), JobState.CANCELLED, "w0", "fast")
    metrics.pending_cancelled()
    assert sample(metrics, "comfy_gateway_jobs_finished_total", outcome="cancelled",
                  worker="w0", group="fast", family="sdxl") == 1  # fmt: skip
    assert sample(metrics, "comfy_gateway_jobs_finished_total", outcome="cancelled",
                  worker="", group="", family="") == 1  # fmt: skip
    assert sample(metrics, "comfy_gateway_job_seconds_count",
                  worker="w0", group="fast", family="sdxl") is None  # fmt: skip


def test_phases_are_observed_by_phase_worker_group_and_family() -> None:
    metrics = Metrics()
    phases = {"queue": 1.5, "load": 4.0, "sample": 9.0}
    metrics.observe_phases(phases, worker="w0", group="fast", checkpoint="flux1-dev.safetensors")
    labels = {"worker": "w0", "group": "fast", "family": "flux"}
    for phase, seconds in phases.items():
        assert sample(metrics, "comfy_gateway_phase_seconds_sum", phase=phase, **labels) == seconds


def test_models_loaded_or_served_from_memory_and_relay_lag() -> None:
    metrics = Metrics(now_ms=lambda: NOW_MS)
    metrics.models_used("w0", "sd15_a.safetensors", loader_cached=False, cached_nodes=0)
    metrics.models_used("w0", "sd15_a.safetensors", loader_cached=True, cached_nodes=7)
    metrics.models_used("w0", "sd15_a.safetensors", loader_cached=None, cached_nodes=0)
    assert sample(metrics, "comfy_gateway_checkpoint_loads_total", worker="w0", family="sd15") == 1
    assert (
        sample(metrics, "comfy_gateway_checkpoint_cache_hits_total", worker="w0", family="sd15")
        == 1
    )
    assert sample(metrics, "comfy_gateway_cached_nodes_total", worker="w0") == 7
    metrics.relay_event("w0", NOW_MS - 40)
    metrics.relay_event("w0", "not a stamp")
    assert sample(metrics, "comfy_gateway_relay_lag_seconds_count", worker="w0") == 1
    assert sample(metrics, "comfy_gateway_relay_lag_seconds_sum", worker="w0") == 0.04


def test_requeues_are_retries_when_they_failed_else_redispatches() -> None:
    metrics = Metrics()
    metrics.job_requeued("w0", "crashed its worker", failed=True)
    metrics.job_requeued("w0", "taken back for w1", failed=False)
    assert (
        sample(metrics, "comfy_gateway_job_retries_total", worker="w0", reason="crashed its worker")
        == 1
    )
    assert (
        sample(metrics, "comfy_gateway_job_redispatches_total", worker="w0", reason="taken back")
        == 1
    )


def test_two_apps_never_share_a_counter() -> None:
    first, second = Metrics(), Metrics()
    first.job_accepted("sd15_a.safetensors")
    assert sample(first, "comfy_gateway_jobs_accepted_total", family="sd15") == 1
    assert sample(second, "comfy_gateway_jobs_accepted_total", family="sd15") is None
