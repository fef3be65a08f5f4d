"""The placement policy interface and the registry that `--policy NAME` selects from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

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


POLICIES: dict[str, Callable[[], Policy]] = {}


def register(name: str) -> Callable[[Callable[[], Policy]], Callable[[], Policy]]:
    def add(factory: Callable[[], Policy]) -> Callable[[], Policy]:
        POLICIES[name] = factory
        return factory

    return add


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
