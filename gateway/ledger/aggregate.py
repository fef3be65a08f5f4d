"""Job ledgers summed up: per worker, group, model family or workflow shape, cold and warm
apart, and the diagnostic rule of where a slow job loses its time.

Only jobs that succeeded and whose events were timed count (`timed`: the relay's span agreed
with the worker's stamps). A job is cold when it was the first of its worker's process or a
loader node executed (it read its models); warm otherwise.

The diagnostic rule, per worker and workflow shape: with `first` the seconds of its cold first
job and `next` the median of its warm jobs, `(first - next) / first` above `ONE_TIME_SHARE`
says the first job is dominated by one-time cost (load, CUDA's first use): preload the model or
warm the worker up. At or below it, warm jobs slower than `SLOW_FACTOR` times the fastest
worker's on that shape say the per-frame path is slow: try another attention backend, VAE
precision or VRAM mode (`comfy-gateway tune`).

Pure: ledgers (dicts as `gateway.ledger.record` writes them) in, JSON-able dicts out.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gateway.ledger.record import PHASES

Ledger = Mapping[str, Any]
KEYS = ("worker", "group", "family", "shape")
"""What ledgers can be summed by."""
MEASURES = ("total_s", "queue_s", "dispatch_s", "exec_s", *PHASES)
ONE_TIME_SHARE = 0.8
SLOW_FACTOR = 1.25


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stats(values: Sequence[float]) -> dict[str, float | int]:
    """n, mean, median and p95 of `values` (n alone when empty)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 6),
        "median": round(statistics.median(values), 6),
        "p95": round(percentile(values, 0.95), 6),
    }


def measure(ledger: Ledger, name: str) -> float | None:
    """One measure of a ledger: a phase's seconds or one of its spans (None: not known)."""
    value = ledger["phases"].get(name) if name in PHASES else ledger.get(name)
    return float(value) if isinstance(value, int | float) else None


def usable(ledgers: Iterable[Ledger]) -> list[Ledger]:
    """The ledgers that measure something: succeeded, timed."""
    return [x for x in ledgers if x.get("state") == "success" and x.get("timed")]


def summary(ledgers: Sequence[Ledger]) -> dict[str, dict[str, float | int]]:
    """Stats of every measure over `ledgers`."""
    out = {}
    for name in MEASURES:
        values = [v for v in (measure(x, name) for x in ledgers) if v is not None]
        out[name] = stats(values)
    return out


def split(ledgers: Iterable[Ledger], key: Callable[[Ledger], str]) -> dict[str, list[Ledger]]:
    """Ledgers by `key`, in the order met."""
    parts: dict[str, list[Ledger]] = defaultdict(list)
    for ledger in ledgers:
        parts[key(ledger)].append(ledger)
    return dict(parts)


def temperature(ledger: Ledger) -> str:
    return "cold" if ledger.get("cold") else "warm"


def by(ledgers: Iterable[Ledger], key: str) -> dict[str, dict[str, Any]]:
    """Per value of `key` (one of `KEYS`): stats of each measure, cold and warm apart."""
    if key not in KEYS:
        raise ValueError(f"ledgers sum up by {', '.join(KEYS)}, not {key!r}")
    out = {}
    for value, part in split(usable(ledgers), lambda x: str(x.get(key))).items():
        temps = split(part, temperature)
        out[value] = {t: summary(temps.get(t, [])) for t in ("cold", "warm")}
    return out


def diagnose(ledgers: Iterable[Ledger]) -> list[dict[str, Any]]:
    """The diagnostic rule per worker and workflow shape (ledgers newest first, as stored),
    with the numbers that led to it."""
    kept = usable(ledgers)
    warm_medians = _warm_medians(kept)
    return [_rule(part, warm_medians) for part in split(kept, _worker_shape).values()]


def _worker_shape(ledger: Ledger) -> str:
    return f"{ledger['worker']}\n{ledger['shape']}"


def _warm_medians(ledgers: Sequence[Ledger]) -> dict[tuple[str, str], float]:
    """(worker, shape) -> median seconds of its warm jobs."""
    medians = {}
    for part in split(ledgers, _worker_shape).values():
        warm = [float(x["exec_s"]) for x in part if not x.get("cold")]
        if warm:
            medians[(part[0]["worker"], part[0]["shape"])] = statistics.median(warm)
    return medians


def _rule(part: Sequence[Ledger], warm_medians: Mapping[tuple[str, str], float]) -> dict[str, Any]:
    worker, shape = part[0]["worker"], part[0]["shape"]
    firsts = [x for x in part if x.get("process_job") == 1] or [x for x in part if x.get("cold")]
    next_s = warm_medians.get((worker, shape))
    base: dict[str, Any] = {"worker": worker, "shape": shape, "family": part[0].get("family")}
    if not firsts or next_s is None:
        return {**base, "verdict": "unknown", "hint": "needs a cold first job and a warm one"}
    first_s = float(firsts[0]["exec_s"])  # the newest first job
    share = (first_s - next_s) / first_s if first_s > 0 else 0.0
    peers = {w: s for (w, sh), s in warm_medians.items() if sh == shape}
    best_worker = min(peers, key=lambda w: peers[w])
    numbers = {
        "first_s": round(first_s, 4),
        "next_s": round(next_s, 4),
        "one_time_share": round(share, 4),
        "best_next_s": round(peers[best_worker], 4),
        "best_worker": best_worker,
        "warm_jobs": sum(1 for x in part if not x.get("cold")),
    }
    if share > ONE_TIME_SHARE:
        verdict, hint = "one_time_cost", _one_time_hint(firsts[0])
    elif next_s > SLOW_FACTOR * peers[best_worker]:
        verdict = "slow_per_frame"
        hint = (
            f"warm jobs take {next_s / peers[best_worker]:.2f}x those of {best_worker}: "
            f"the per-frame path is slow ({_slowest_phase(part)} leads); try another "
            "attention backend, VAE precision or VRAM mode (comfy-gateway tune)"
        )
    else:
        verdict, hint = "ok", "no dominant one-time cost; warm jobs as fast as the farm's best"
    return {**base, **numbers, "verdict": verdict, "hint": hint}


def _one_time_hint(first: Ledger) -> str:
    phases = first["phases"]
    lead = max(PHASES, key=lambda p: phases.get(p, 0.0))
    return (
        f"the first job is dominated by one-time cost ({lead} {phases[lead]:.2f} s of "
        f"{first['exec_s']:.2f} s): preload its model or warm the worker up"
    )


def _slowest_phase(part: Sequence[Ledger]) -> str:
    warm = [x for x in part if not x.get("cold")]
    medians = {p: statistics.median(float(x["phases"][p]) for x in warm) for p in PHASES}
    return max(medians, key=lambda p: medians[p])
