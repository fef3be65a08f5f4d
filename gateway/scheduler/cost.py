"""Expected seconds a job costs on a worker: wait + loads of what is not resident + work / speed.

Pure functions over the snapshot views; every policy that reasons in seconds uses these, so
their estimates agree. Residency is modelled as an LRU list of model keys, most recently used
first, holding `cache_slots` keys (or the keys of one prompt, whichever is more).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gateway.scheduler.snapshot import JobView, WorkerView
from workers.comfy.families import TYPICAL_GB

DEFAULT_SPEED = 1.0
"""Work units per second assumed for a family a worker has never run (nothing better known)."""
DEFAULT_LOAD_S = 10.0
"""Seconds assumed to load a model key on a worker that knows no load at all (nothing
measured anywhere: `gateway.scheduler.estimates` fills in what other workers measured)."""
FIRST_USE_S = 3.0
"""Seconds a cold worker's first prompt pays for the card's first use (CUDA's first use, the
kernels' warm-up) beyond its load and warm run: 2-5 s on real cards (`bench/results/real_gpu.md`:
a first job 4.1 s without preload, 0.8-1.3 s with), 2.0-3.5 s in the emulated profiles. Paid
once per worker process, so an error here misprices one job
(`gateway.learning.learn.outstanding_s`)."""


def models_of(job: JobView) -> frozenset[str]:
    """The model keys a job needs resident: its loader files, else its checkpoint, else none."""
    if job.model_keys:
        return job.model_keys
    return frozenset((job.checkpoint,)) if job.checkpoint else frozenset()


RESERVED_GROUP_PREFIX = "tune."
"""A worker in a group named so (one being tuned) takes only the jobs pinned to its group."""


def can_run(job: JobView, worker: WorkerView) -> bool:
    """Whether the worker is eligible for the job (validation, A/B group)."""
    if job.eligible is not None and worker.name not in job.eligible:
        return False
    return group_admits(worker.group, job.group)


def group_admits(worker_group: str, job_group: str | None) -> bool:
    """Whether a worker of `worker_group` may run a job pinned to `job_group` (None: none)."""
    if job_group is None:
        return not worker_group.startswith(RESERVED_GROUP_PREFIX)
    return job_group == worker_group


def speed_of(worker: WorkerView, family: str) -> float:
    """Work units per second of `worker` for `family`; the mean of its known families if this one
    was never measured."""
    speed = worker.speed.get(family)
    if speed is not None and speed > 0:
        return speed
    known = [value for value in worker.speed.values() if value > 0]
    return sum(known) / len(known) if known else DEFAULT_SPEED


def run_s(job: JobView, worker: WorkerView) -> float:
    """Warm seconds of the job on the worker (nothing to load)."""
    fixed = worker.fixed_s.get(job.family, 0.0)
    return fixed + job.work_units / speed_of(worker, job.family)


def key_load_s(worker: WorkerView, key: str, family: str) -> float:
    """Seconds to load one model key on the worker: by key, else by family, else from the
    loads of its other families in proportion to what each family loads (`TYPICAL_GB`: an
    SDXL checkpoint is about 3x an SD1.5 one), else the mean of its known loads, else the
    default."""
    seconds = worker.load_s.get(key)
    if seconds is None:
        seconds = worker.load_s.get(family)
    if seconds is None:
        seconds = _by_size(worker.load_s, family)
    if seconds is None:
        known = worker.load_s.values()
        seconds = sum(known) / len(known) if known else DEFAULT_LOAD_S
    return seconds


def _by_size(load_s: Mapping[str, float], family: str) -> float | None:
    """The family's load seconds scaled from the other families' loads in `load_s` by the
    gigabytes each loads (None: the family's size or the others' loads unknown)."""
    size = TYPICAL_GB.get(family)
    if size is None:
        return None
    scaled = [s * size / TYPICAL_GB[f] for f, s in load_s.items() if f in TYPICAL_GB]
    return sum(scaled) / len(scaled) if scaled else None


def load_s(job: JobView, worker: WorkerView, resident: Iterable[str]) -> float:
    """Seconds to load what the job needs and `resident` does not hold."""
    models = models_of(job)
    if len(models) == 1:  # the common prompt, one checkpoint: no set to build
        (only,) = models
        return 0.0 if only in resident else key_load_s(worker, only, job.family)
    held = set(resident)
    return sum(key_load_s(worker, key, job.family) for key in models - held)


def touch(resident: tuple[str, ...], models: frozenset[str], slots: int) -> tuple[str, ...]:
    """Residency after running a prompt that uses `models` (MRU first, LRU evicted)."""
    if not models:
        return resident
    if len(models) == 1:  # the common prompt, one checkpoint: no sort, and no copy to filter
        (only,) = models
        rest = tuple([key for key in resident if key != only]) if only in resident else resident
        return (only, *rest)[: max(slots, 1)]
    rest = tuple([key for key in resident if key not in models])  # a list: half the time
    return (tuple(sorted(models)) + rest)[: max(slots, len(models))]


def evicted(resident: tuple[str, ...], models: frozenset[str], slots: int) -> frozenset[str]:
    """Model keys that running a prompt using `models` pushes out of `resident`."""
    return frozenset(resident) - frozenset(touch(resident, models, slots))


def resident_after_queue(worker: WorkerView) -> tuple[str, ...]:
    """What the worker will hold once the jobs it has queued (not started) have run."""
    resident = worker.resident
    for models in worker.queued:
        resident = touch(resident, models, worker.cache_slots)
    return resident


def completion_s(job: JobView, worker: WorkerView) -> float:
    """Expected seconds from now until the job would finish if sent to the worker now, behind
    what it already holds: wait + load of what will not be resident + warm run."""
    resident = resident_after_queue(worker)
    return worker.outstanding_s + load_s(job, worker, resident) + run_s(job, worker)


def is_warm(job: JobView, resident: Iterable[str]) -> bool:
    """Whether every model key of the job is in `resident`."""
    models = models_of(job)
    if len(models) == 1:
        (only,) = models
        return only in resident
    return models <= set(resident)


def with_job(worker: WorkerView, job: JobView) -> WorkerView:
    """The worker as it will be once `job` is queued on it (residency and work carried on)."""
    cost = load_s(job, worker, resident_after_queue(worker)) + run_s(job, worker)
    return replace(
        worker,
        free_slots=worker.free_slots - 1,
        outstanding=worker.outstanding + 1,
        outstanding_s=worker.outstanding_s + cost,
        queued=(*worker.queued, models_of(job)),
    )


def idle_order(worker: WorkerView) -> tuple[int, float, str]:
    """Least busy first, then the longest idle (SwarmUI's `last_used` preference)."""
    idle_since = worker.idle_since_s if worker.idle_since_s is not None else float("inf")
    return (worker.outstanding, idle_since, worker.name)
