"""What the gateway learns about each worker from the jobs it runs, as the policies need it.

Pure: every function returns new values. The relay feeds each prompt's events to its
`NodeClock` (`gateway.learning.timing`); when the prompt ends, `finished` says what executed (loader
nodes = load, sampler set-up before the first step = the rest of the load, everything else =
the warm run; cached nodes count for nothing) and `learn` folds that into the worker's
`Knowledge`:

- speed per model family (`gateway.learning.speed`: seeded by the warm-up's speed probe, or
  else by the first job of a family, then observed, robust to outliers), from the work units
  of the samplers that executed and the seconds of a warm run of what executed: a job that
  loaded teaches it too once its samplers' set-up is told apart (their steps were timed); a
  job whose samplers were all cached teaches none;
- load seconds per model key (and per family, for keys never loaded there) from jobs that
  loaded: their loader nodes that executed plus the samplers' set-up (the copy to VRAM
  happens in the sampler), or, with steps untimed, what the rest took beyond a warm run; the
  warm-up seeds them (`gateway.recovery.lifecycle`);
- residency (`gateway.learning.residency`): the prompt's models become the most recent,
  corrected by `execution_cached` (a cached loader = resident) and by load-phase timing.

The warm-up's own sample phase is no speed measurement (it holds the copy to VRAM and CUDA's
first use, `workers.warmup.prompts.WarmupResult`); the speed probe run right after it (a warm job at
the family's native size, `workers.warmup.prompts.probe_prompt`) is, and
`gateway.recovery.lifecycle` seeds
the family's speed with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gateway.learning import demand, residency
from gateway.learning import speed as learned
from gateway.learning.timing import (
    Finished,
    NodeClock,
    finished,
    is_loader,
    on_cached,
    on_executing,
)
from gateway.scheduler import cost
from gateway.scheduler.snapshot import JobView, WorkerView
from workers.comfy.families import family_of
from workers.comfy.launch_args import checkpoints_fitting, checkpoints_kept, plan_launch
from workers.warmup.prompts import WarmupResult

__all__ = [
    "LOADED_FRACTION",
    "LOAD_CLIP",
    "LOAD_SMOOTHING",
    "SEEN_LIMIT",
    "Arrivals",
    "Finished",
    "Knowledge",
    "NodeClock",
    "arrived",
    "believed_after",
    "cache_slots",
    "family_of",
    "finished",
    "is_loader",
    "learn",
    "learn_from_twin",
    "loading_s",
    "on_cached",
    "on_executing",
    "outstanding_s",
    "speed_views",
]

LOAD_SMOOTHING = 0.5
"""Weight of a new load measurement against the estimate so far."""
LOAD_CLIP = 3.0
"""A load measurement counts at most this many times off the estimate so far."""
LOADED_FRACTION = residency.LOADED_FRACTION


def cache_slots(args: Sequence[str], vram_total_mib: float | None, *, launched: bool) -> int:
    """Checkpoints the instance keeps at once: 1 under the classic cache; under
    `--cache-lru N` (the gateway adds one where several fit to instances it `launched`) as
    many as N node results hold when txt2img prompts take turns over them (N counts results,
    not checkpoints: 8 keeps one, 22 four), as far as its VRAM allows."""
    final = tuple(args)
    if launched:
        with contextlib.suppress(ValueError):
            final = plan_launch(args, vram_total_mib).args
    size = _lru_size(final)
    if size is None or size == 0:
        return 1
    kept = checkpoints_kept(size)
    if vram_total_mib is not None:
        kept = min(kept, max(checkpoints_fitting(vram_total_mib), 1))
    return kept


def _lru_size(args: Sequence[str]) -> int | None:
    size: int | None = None
    for i, token in enumerate(args):
        name, _, value = token.partition("=")
        if name in ("--cache-classic", "--cache-none"):
            size = None
        elif name == "--cache-lru":
            text = value or (args[i + 1] if i + 1 < len(args) else "")
            size = int(text) if text.isdigit() else None
    return size


@dataclass(frozen=True)
class Knowledge:
    """What the gateway believes about one worker."""

    book: Mapping[str, learned.SpeedEstimate] = field(default_factory=dict)
    """Speed estimate by model family."""
    load_s: Mapping[str, float] = field(default_factory=dict)
    """Load seconds by model key, and by family for keys never loaded there."""
    resident: tuple[str, ...] = ()


def learn(known: Knowledge, done: Finished, slots: int) -> Knowledge:
    """The knowledge after `done` ran on the worker (which keeps `slots` checkpoints)."""
    evidence = _evidence(known, done)
    taught = _taught(known, known, done, evidence)
    return replace(taught, resident=believed_after(known.resident, evidence, slots))


def learn_from_twin(twin: Knowledge, origin: Knowledge, done: Finished) -> Knowledge:
    """What a twin learns from `done`, which ran on a worker of the same cards launched alike
    (two instances sharing a card) that knew `origin` before it: the same lessons of speed and
    load seconds, judged on the worker that ran it; the twin's residency as it was."""
    return _taught(twin, origin, done, _evidence(origin, done))


def _evidence(known: Knowledge, done: Finished) -> residency.Evidence:
    return residency.Evidence(
        done.models,
        done.loader_cached,
        loading_s(known.book, done),
        _expected_load_s(known.load_s, done),
    )


def _taught(
    learner: Knowledge, origin: Knowledge, done: Finished, evidence: residency.Evidence
) -> Knowledge:
    """`learner`'s speeds and load seconds once `done` ran where `origin` was known."""
    loaded = residency.was_resident(evidence) is False
    # A load's copy to VRAM lands in the sampler: its run is a warm one only once the
    # samplers' set-up is told apart from their steps.
    teaches_speed = not loaded or done.setup_s is not None
    return Knowledge(
        book=_speed(learner.book, done) if teaches_speed else learner.book,
        load_s=(
            _loads(learner.load_s, origin.resident, done, evidence) if loaded else learner.load_s
        ),
        resident=learner.resident,
    )


def shifted(
    before: Mapping[str, learned.SpeedEstimate], after: Mapping[str, learned.SpeedEstimate]
) -> list[tuple[str, float, float]]:
    """(family, speed before, speed after) for each family whose drift detector fired: the
    card runs it at a new pace (throttled, shared, or freed)."""
    return [
        (family, before[family].speed, est.speed)
        for family, est in after.items()
        if family in before and est.shifts > before[family].shifts
    ]


def loading_s(book: Mapping[str, learned.SpeedEstimate], done: Finished) -> float | None:
    """Seconds the job spent loading: its loader nodes, plus its samplers' set-up before their
    first step, or, with their steps untimed, what its other nodes took beyond a warm run (the
    copy of the weights to VRAM happens in the sampler, as in ComfyUI). A worker's first
    prompt counts its loader nodes alone, as its warm-up would (`warmed`): its set-up also held
    the card's first use, 2-5 s that would make every later load of the worker look that much
    slower, and the worker the last choice for any load."""
    if done.load_s is None or done.first_use:
        return done.load_s
    if done.setup_s is not None:
        return done.load_s + done.setup_s
    estimate = book.get(done.family)
    if estimate is None or done.run_s is None:
        return done.load_s
    return done.load_s + max(done.run_s - estimate.predict_s(done.work_units), 0.0)


def _expected_load_s(load_s: Mapping[str, float], done: Finished) -> float | None:
    known = [load_s[key] for key in done.models if key in load_s]
    if known:
        return sum(known)
    return load_s.get(done.family)


def _speed(
    book: Mapping[str, learned.SpeedEstimate], done: Finished
) -> Mapping[str, learned.SpeedEstimate]:
    """A warm run of executed samplers teaches the family's speed; one that sampled nothing
    (every sampler cached) or was not timed teaches nothing."""
    seconds = done.warm_s
    if seconds is None or seconds <= 0 or done.work_units <= 0 or done.family == "unknown":
        return book
    estimate = book.get(done.family)
    if estimate is None:
        estimate = learned.seed(done.work_units, seconds)
    else:
        estimate = learned.observe(estimate, done.work_units, seconds)
    return {**book, done.family: estimate}


def _loads(
    known_s: Mapping[str, float],
    resident: Sequence[str],
    done: Finished,
    evidence: residency.Evidence,
) -> Mapping[str, float]:
    """A job that really loaded updates the estimates `known_s` of the keys that were not
    `resident` where it ran."""
    seconds = evidence.load_s
    if seconds is None or not done.models:
        return known_s
    if evidence.expected_load_s and seconds < LOADED_FRACTION * evidence.expected_load_s:
        return known_s  # the loader ran but found its models in memory
    fresh = sorted(done.models - set(resident)) or sorted(done.models)
    share = seconds / len(fresh)
    load_s = dict(known_s)
    for key in (*fresh, done.family):
        load_s[key] = _smoothed(load_s.get(key), share)
    return load_s


def _smoothed(before: float | None, measured: float) -> float:
    """The load estimate after `measured`; a measurement more than `LOAD_CLIP` times off the
    estimate counts as `LOAD_CLIP` times off (a first read from disk, a stalled socket)."""
    if before is None or before <= 0:
        return measured
    measured = min(max(measured, before / LOAD_CLIP), before * LOAD_CLIP)
    return (1.0 - LOAD_SMOOTHING) * before + LOAD_SMOOTHING * measured


def believed_after(
    believed: tuple[str, ...], evidence: residency.Evidence, slots: int
) -> tuple[str, ...]:
    """Residency once the prompt ran; a prompt that loaded models believed resident shows
    the cache held less than believed, so the older belief is dropped."""
    if not evidence.models:
        return believed
    if residency.surprised(believed, evidence) and residency.was_resident(evidence) is False:
        believed = ()
    return residency.after_prompt(believed, evidence, slots)


def speed_views(
    book: Mapping[str, learned.SpeedEstimate],
) -> tuple[dict[str, float], dict[str, float]]:
    """(`speed`, `fixed_s`) for a `WorkerView`."""
    return (
        {family: est.speed for family, est in book.items()},
        {family: est.fixed_s for family, est in book.items()},
    )


def outstanding_s(
    worker: WorkerView, held: Iterable[tuple[JobView, float]], *, cold: bool = False
) -> float:
    """Expected seconds until the worker has finished `held` (each job with the seconds it
    has run so far, 0 if not started), in order, residency carried forward job by job. On a
    `cold` worker (it has run nothing yet) the first of them pays the card's first use
    (`cost.FIRST_USE_S`); an idle cold worker is 0 s from a job."""
    # Not priced idle on purpose: with its first use it was passed over for every job a warm
    # worker could run, and the reloads that cost recur (README, "Nor is an instance that has
    # run nothing since it started ... priced with its first use").
    resident = worker.resident
    total = 0.0
    first_use_s = cost.FIRST_USE_S if cold else 0.0
    for job, elapsed_s in held:
        expected = first_use_s + cost.load_s(job, worker, resident) + cost.run_s(job, worker)
        total += max(expected - elapsed_s, 0.0)
        resident = cost.touch(resident, cost.models_of(job), worker.cache_slots)
        first_use_s = 0.0
    return total


@dataclass(frozen=True)
class Arrivals:
    """The demand meter over the jobs seen waiting so far (each counted once)."""

    meter: demand.DemandMeter = field(default_factory=demand.DemandMeter)
    seen: tuple[str, ...] = ()
    """Job ids already counted, the most recent `SEEN_LIMIT`."""
    latest: Mapping[str, JobView] = field(default_factory=dict)
    """The latest job counted per checkpoint: what a cold worker may warm up on
    (`gateway.scheduler.warming`)."""


SEEN_LIMIT = 4096


def arrived(arrivals: Arrivals, jobs: Iterable[JobView]) -> Arrivals:
    """Count the jobs not seen before, each at its enqueue time."""
    seen = set(arrivals.seen)
    new = sorted((j for j in jobs if j.job_id not in seen), key=lambda j: j.enqueued_at_s)
    if not new:
        return arrivals
    meter, latest = arrivals.meter, dict(arrivals.latest)
    for job in new:
        meter = demand.observe(meter, cost.models_of(job), job.enqueued_at_s)
        if job.checkpoint:
            latest[job.checkpoint] = job
    ids = (*arrivals.seen, *(j.job_id for j in new))[-SEEN_LIMIT:]
    return Arrivals(meter, ids, latest)


def warmed(known: Knowledge, warmups: Sequence[WarmupResult]) -> Knowledge:
    """What a worker's warm-ups teach: each one's cold timing (its loader node, else the whole
    warm-up) is the load of its checkpoint and, until a checkpoint of the family loads there,
    of its family; its speed probes seed the family's speed (`probed`); the last checkpoint
    is resident."""
    book, load_s, resident = known.book, dict(known.load_s), known.resident
    for result in warmups:
        seconds = result.load_s if result.load_s is not None else result.seconds
        load_s[result.checkpoint] = seconds
        load_s.setdefault(family_of(result.checkpoint), seconds)
        book = probed(book, result)
    if warmups:
        resident = (warmups[-1].checkpoint,)
    return Knowledge(book, load_s, resident)


def probed(
    book: Mapping[str, learned.SpeedEstimate], result: WarmupResult
) -> Mapping[str, learned.SpeedEstimate]:
    """The speed book once `result`'s speed probes (warm jobs at two sizes) are taken in: they
    seed its family's estimate (`speed.seed_from_probes`), or are more observations of an
    estimate already there (restored, or probed on an earlier checkpoint of the family)."""
    family = family_of(result.checkpoint)  # the family its jobs are learned under
    points = [(units, seconds) for units, seconds in result.probes if units > 0 and seconds > 0]
    if not points or family == "unknown":
        return book
    known = book.get(family)
    if known is None:
        estimate = learned.seed_from_probes(points)
        return book if estimate is None else {**book, family: estimate}
    for units, seconds in points:
        known = learned.observe(known, units, seconds)
    return {**book, family: known}
