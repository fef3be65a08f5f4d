"""What `/gateway/workers` shows of a worker beyond its link: supervision and GPU telemetry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.dispatch.links import WorkerLink, WorkerState
from gateway.scheduler.snapshot import WorkerView
from workers.supervision.events import Phase
from workers.supervision.worker import WorkerStatus
from workers.telemetry import GpuSample, TelemetrySnapshot


def display_state(link: WorkerLink, status: WorkerStatus | None) -> str:
    """One word: the supervisor's phase until the worker is ready, then the link's state;
    `unresponsive` while its HTTP does not answer the liveness probe."""
    if status is not None and status.phase is not Phase.READY:
        return status.phase.value
    if link.draining:
        return "draining"
    if link.state is WorkerState.READY and not link.responsive:
        return "unresponsive"
    return link.state.value


def supervision_fields(status: WorkerStatus | None) -> dict[str, Any]:
    if status is None:
        return {"supervised": False}
    return {
        "supervised": True,
        "phase": status.phase.value,
        "reason": status.reason,
        "restarts": status.restarts,
        "last_exit": status.last_exit,
        "restart_in_s": _rounded(status.restart_in_s),
        "up_s": _rounded(status.up_s),
        "args": list(status.args),
        "arg_reasons": list(status.arg_reasons),
        "preload": list(status.preload),
        "warmup": [
            {
                "checkpoint": result.checkpoint,
                "seconds": round(result.seconds, 3),
                "phase_s": {str(k): round(v, 3) for k, v in result.phase_s.items()},
                "probe_units": _rounded(result.probe_units),
                "probe_s": _rounded(result.probe_s),
                "small_units": _rounded(result.small_units),
                "small_s": _rounded(result.small_s),
            }
            for result in status.warmups
        ],
        "log": status.log_path,
    }


def telemetry_fields(snapshot: TelemetrySnapshot | None, indices: Sequence[int]) -> dict[str, Any]:
    """The latest reading of each GPU of the worker's slot, or why there is none."""
    if snapshot is None or not snapshot.available:
        reason = snapshot.reason if snapshot is not None else "telemetry not running"
        return {"available": False, "reason": reason}
    gpus = [gpu_fields(snapshot.gpus[i]) for i in indices if i in snapshot.gpus]
    errors = {str(i): snapshot.errors[i] for i in indices if i in snapshot.errors}
    return {"available": True, "gpus": gpus, "errors": errors}


def gpu_fields(sample: GpuSample) -> dict[str, Any]:
    return {
        "index": sample.index,
        "name": sample.name,
        "memory_used_mib": round(sample.memory_used_mib, 1),
        "memory_total_mib": round(sample.memory_total_mib, 1),
        "utilization_pct": sample.utilization_pct,
        "temperature_c": sample.temperature_c,
        "power_w": sample.power_w,
        "sm_clock_mhz": sample.sm_clock_mhz,
    }


def vram_of(
    snapshot: TelemetrySnapshot | None, indices: Sequence[int]
) -> tuple[float, float] | None:
    """(free, total) MiB of the slot's smallest card, None when unknown."""
    if snapshot is None or not indices:
        return None
    samples = [snapshot.gpus[i] for i in indices if i in snapshot.gpus]
    if len(samples) != len(indices):
        return None
    smallest = min(samples, key=lambda sample: sample.memory_total_mib)
    return smallest.memory_free_mib, smallest.memory_total_mib


def gpu_names_of(snapshot: TelemetrySnapshot | None, indices: Sequence[int]) -> tuple[str, ...]:
    """The NVML name of each card of the slot; empty unless every one was read."""
    if snapshot is None or not snapshot.available or not indices:
        return ()
    if any(i not in snapshot.gpus for i in indices):
        return ()
    return tuple(snapshot.gpus[i].name for i in indices)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def learned_fields(link: WorkerLink, believed: WorkerView | None = None) -> dict[str, Any]:
    """What the gateway learned of the worker: per model family its speed, fixed seconds and
    the jobs observed; load seconds by model key (or family); the models believed in VRAM;
    whether it started from a state saved before (`gateway.farm.learned_store`); the card it is
    compared
    by; and what placement estimates of what it never measured (`believed`, the dispatcher's
    view: `gateway.dispatch.estimated`)."""
    restored = link.restored
    return {
        "families": {
            family: {
                "units_per_s": _significant(1.0 / est.per_unit_s) if est.per_unit_s > 0 else None,
                "fixed_s": _significant(est.fixed_s),
                "observations": est.observations,
                "shifts": est.shifts,
            }
            for family, est in sorted(link.speed_book.items())
        },
        "load_s": {key: round(value, 3) for key, value in sorted(link.load_s.items())},
        "resident": list(link.resident),
        "restored": restored is not None,
        "restored_from": None
        if restored is None
        else {
            "node": restored.node,
            "saved_at_ms": restored.saved_at_ms,
            "restored_at_ms": restored.restored_at_ms,
        },
        "card": link.card,
        "estimated": estimated_fields(believed),
    }


def estimated_fields(believed: WorkerView | None) -> dict[str, Any]:
    """The speeds (with fixed seconds) and load seconds placement estimated for a worker that
    never measured them; they go as it measures them."""
    if believed is None:
        return {"families": {}, "load_s": {}}
    return {
        "families": {
            family: {
                "units_per_s": _significant(believed.speed[family]),
                "fixed_s": _significant(believed.fixed_s.get(family, 0.0)),
            }
            for family in sorted(believed.estimated)
            if family in believed.speed
        },
        "load_s": {
            key: round(believed.load_s[key], 3)
            for key in sorted(believed.estimated_load)
            if key in believed.load_s
        },
    }


def _significant(value: float) -> float:
    """Four significant digits: emulated workers' seconds are small."""
    return float(f"{value:.4g}")
