"""A/B experiments: matching traffic split across worker groups, so that the same workload
runs on each launch configuration.

An experiment names two or more groups (the first is the baseline the others are compared
with), their weights (equal by default) and, optionally, the workflow shapes it takes (none:
every workflow). It comes from the config file (`[[experiments]]`) or from
`POST /gateway/experiments` (kept in Redis, `PREFIX:experiments`, so every node of the farm
splits alike). A new job that pins no group (`extra_data.gateway.group`) and whose shape an
experiment takes is given one of its groups, the one furthest below its weighted share of
the jobs this node split so far, among the groups with a worker able to run it; placement
then applies inside that group. The job's placement names the experiment, and so does its
ledger, which is what `gateway.ledger.abreport` compares.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.jobs.keys import Keys
from gateway.jobs.models import NewJob
from gateway.ledger.record import shape_of

REFRESH_S = 1.0
"""How stale this node's copy of the experiments stored in Redis may be."""


class Experiment(BaseModel):
    """One A/B experiment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    groups: tuple[str, ...] = Field(min_length=2)
    """The groups compared; the first is the baseline."""
    weights: tuple[float, ...] | None = None
    """Share of the matching jobs each group gets (equal when absent)."""
    shapes: tuple[str, ...] = ()
    """Workflow shapes it takes (`gateway.ledger.record.shape_of`); empty: every workflow."""

    @field_validator("groups")
    @classmethod
    def _distinct(cls, groups: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(groups)) != len(groups):
            raise ValueError("groups must be distinct")
        return groups

    @model_validator(mode="after")
    def _weights_fit(self) -> Experiment:
        if self.weights is not None:
            if len(self.weights) != len(self.groups):
                raise ValueError("weights must give one weight per group")
            if any(w <= 0 for w in self.weights):
                raise ValueError("weights must be positive")
        return self

    def weight(self, group: str) -> float:
        return 1.0 if self.weights is None else self.weights[self.groups.index(group)]

    def takes(self, shape: str) -> bool:
        return not self.shapes or shape in self.shapes


class Experiments:
    """The farm's experiments (configured and stored) and this node's split of new jobs."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        configured: Sequence[Experiment] = (),
        clock: Callable[[], float] = time.monotonic,
    ):
        self.redis = redis
        self.keys = keys
        self.configured = {e.name: e for e in configured}
        self.clock = clock
        self._stored: dict[str, Experiment] = {}
        self._loaded_s: float | None = None
        self._split: Counter[tuple[str, str]] = Counter()
        """(experiment, group) -> jobs this node gave that group."""

    async def all(self) -> list[Experiment]:
        """Every experiment: the configured ones, then those added by the API."""
        if self._loaded_s is None or self.clock() - self._loaded_s > REFRESH_S:
            raw = await self.redis.hgetall(self.keys.experiments)
            self._stored = {
                str(name): Experiment.model_validate_json(text) for name, text in raw.items()
            }
            self._loaded_s = self.clock()
        stored = [e for name, e in self._stored.items() if name not in self.configured]
        return [*self.configured.values(), *stored]

    async def get(self, name: str) -> Experiment | None:
        return next((e for e in await self.all() if e.name == name), None)

    async def add(self, experiment: Experiment) -> bool:
        """Store an experiment; False when a configured one has that name."""
        if experiment.name in self.configured:
            return False
        await self.redis.hset(self.keys.experiments, experiment.name, experiment.model_dump_json())
        self._loaded_s = None
        return True

    async def remove(self, name: str) -> bool:
        """Forget a stored experiment (its jobs' ledgers stay); False when there is none."""
        removed = bool(await self.redis.hdel(self.keys.experiments, name))
        self._loaded_s = None
        return removed

    async def assign(self, job: NewJob, groups: Mapping[str, str]) -> NewJob:
        """The job with a group chosen by the first experiment that takes it (as it was when
        none does, or when fewer than two of its groups have a worker able to run it)."""
        experiments = await self.all()
        if not experiments:
            return job
        shape = shape_of(job.prompt)
        able = job.placement.eligible or ()
        for experiment in experiments:
            if not experiment.takes(shape):
                continue
            offered = {
                group: tuple(name for name in able if groups.get(name) == group)
                for group in experiment.groups
            }
            arms = [group for group in experiment.groups if offered[group]]
            if len(arms) < 2:
                continue
            group = min(arms, key=lambda g: self._share(experiment, g))
            self._split[(experiment.name, group)] += 1
            placement = replace(
                job.placement, group=group, eligible=offered[group], experiment=experiment.name
            )
            return replace(job, placement=placement)
        return job

    def _share(self, experiment: Experiment, group: str) -> tuple[float, int]:
        """How far the group is along its share (lower: it is owed jobs); ties: in order."""
        given = self._split[(experiment.name, group)]
        return given / experiment.weight(group), experiment.groups.index(group)


def describe(experiment: Experiment, configured: bool) -> dict[str, Any]:
    """An experiment as `GET /gateway/experiments` shows it."""
    body: dict[str, Any] = json.loads(experiment.model_dump_json())
    body["source"] = "config" if configured else "api"
    return body
