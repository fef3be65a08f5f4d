"""The placement policy interface and the registry that `--policy NAME` selects from."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, runtime_checkable

from gateway.scheduler.cost import with_job
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView


class Policy(Protocol):
    """Late binding: given the farm now, which waiting jobs go to which workers with free slots.

    A policy never assigns more jobs to a worker than its `free_slots`, never a job to a worker
    outside the job's `eligible` set, and never the same job twice. It may leave jobs waiting
    (idling briefly can beat a cold load). It does no I/O.
    """

    @property
    def name(self) -> str: ...

    def assign(self, snapshot: Snapshot) -> list[Assignment]: ...


@runtime_checkable
class Stepwise(Policy, Protocol):
    """A policy that can make its decision in bounded steps, so the event loop that asks it
    serves others between two: `steps` yields its assignments in order, and None after a
    step that made none; `assign` is every assignment `steps` yields."""

    def steps(self, snapshot: Snapshot) -> Iterator[Assignment | None]: ...


POLICIES: dict[str, Callable[[], Policy]] = {}
EARLY_BINDING: set[str] = set()
"""Policies that bind each job to a worker on arrival, as a proxy in front of ComfyUI queues
does: the gateway sends a job as soon as its policy places it, with no limit per worker, and the
worker's own queue holds the rest. The others bind late: a worker holds one running and
`prefetch` waiting jobs, the rest wait in the gateway for the best free worker."""
EARLY_CAPACITY = 100_000
"""Jobs an early-binding policy may give one worker: no limit in practice."""
ASK_EVERY_S = 0.25
"""Seconds of the cards between two asks of the policy while nothing happens (no job arrives,
no worker frees): a job a policy holds back, waiting for a busy holder, is looked at again this
late at most once its clock runs out. The dispatcher asks as often on emulated cards, in their
seconds (`timescale.wall_s`), and the simulator ticks as often."""


def register(
    name: str, *, early: bool = False
) -> Callable[[Callable[[], Policy]], Callable[[], Policy]]:
    def add(factory: Callable[[], Policy]) -> Callable[[], Policy]:
        POLICIES[name] = factory
        if early:
            EARLY_BINDING.add(name)
        return factory

    return add


def binds_early(policy: Policy) -> bool:
    return policy.name in EARLY_BINDING


def slots_per_worker(policy: Policy, late_slots: int) -> int:
    """Jobs one worker may hold under `policy`: `late_slots` (running + prefetched) when it binds
    late, no limit when it binds early."""
    return EARLY_CAPACITY if binds_early(policy) else late_slots


class UnknownPolicyError(ValueError):
    pass


def make_policy(name: str) -> Policy:
    try:
        return POLICIES[name]()
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise UnknownPolicyError(f"unknown policy {name!r}; known: {known}") from None


Chooser = Callable[[JobView, Mapping[str, WorkerView]], WorkerView | None]


def in_queue_order(snapshot: Snapshot, choose: Chooser) -> list[Assignment]:
    """One pick at a time: each job in queue order goes where `choose` says, and that worker is
    then seen with the job queued on it."""
    workers = {worker.name: worker for worker in snapshot.workers}
    out: list[Assignment] = []
    for job in snapshot.jobs:
        worker = choose(job, workers)
        if worker is not None:
            workers[worker.name] = with_job(worker, job)
            out.append(Assignment(job.job_id, worker.name))
    return out
