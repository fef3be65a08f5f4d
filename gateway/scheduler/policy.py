"""The placement policy interface and the registry that `--policy NAME` selects from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gateway.scheduler.snapshot import Assignment, Snapshot


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
