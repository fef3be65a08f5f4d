"""Accepting a prompt: parse, validate against the farm, persist, answer."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gateway.api.schemas import PromptRequest, parse_prompt_request
from gateway.api.work_limit import check_work
from gateway.errors import BadRequest, Conflict, PromptRefused, Unavailable, Unprocessable
from gateway.farm.catalog import FarmCatalog
from gateway.jobs.journal import Accepted, Journal
from gateway.jobs.models import NewJob, Placement, display_number
from gateway.jobs.store import EnqueueStatus, JobStore, body_digest
from gateway.ledger.experiments import Experiments
from workers.comfy import Validation


@dataclass(frozen=True)
class Checks:
    """What a prompt passes before it is enqueued, beyond validation; each None: not checked."""

    admit: Callable[[], Awaitable[None]] | None = None
    """Raises when this node takes no new prompts (it is shutting down)."""
    max_job_work: float | None = None
    """Work units one job may take (`gateway.api.work_limit`); None: no limit."""
    refresh_catalog: Callable[[], Awaitable[bool]] | None = None
    """Reads the workers' file lists again (whether it did), before a file is refused."""


class Acceptor:
    """POST /prompt: nothing is answered 200 before the job is in Redis."""

    def __init__(
        self,
        store: JobStore,
        catalog: FarmCatalog,
        groups: Callable[[], Mapping[str, str]],
        on_accepted: Callable[[NewJob], Awaitable[None]],
        *,
        checks: Checks = Checks(),
        journal: Journal | None = None,
        experiments: Experiments | None = None,
    ):
        self.store = store
        self.catalog = catalog
        self.groups = groups
        self.on_accepted = on_accepted
        self.admit = checks.admit
        self.max_job_work = checks.max_job_work
        self.refresh_catalog = checks.refresh_catalog
        self.journal = journal
        """Keeps what was enqueued lately, in case a Redis restart loses it."""
        self.experiments = experiments
        """Split jobs that pin no group across the groups of an experiment."""

    async def accept(self, body: bytes, idempotency_key: str | None) -> dict[str, Any]:
        request = parse_prompt_request(body)
        if self.catalog.empty:
            raise Unavailable("no worker is ready yet; retry shortly", kind="not_ready")
        if self.admit is not None:
            await self.admit()
        validation = await self._validate(request)
        if not validation.ok:
            raise PromptRefused(validation.response_body())
        if self.max_job_work is not None:
            check_work(validation.prompt, self.max_job_work)
        job = self._new_job(request, validation.prompt, validation.outputs)
        if self.experiments is not None and request.group is None:
            job = await self.experiments.assign(job, self.groups())
        idempotency = (idempotency_key, body_digest(body)) if idempotency_key else None
        enqueued_at_ms = self.store.now_ms()
        result = await self.store.enqueue(job, idempotency, enqueued_at_ms=enqueued_at_ms)
        if result.status is EnqueueStatus.CREATED:
            if self.journal is not None:
                numbered = replace(job, number=display_number(result.number))
                counted = job.number is None
                self.journal.record(Accepted(numbered, enqueued_at_ms, counted, idempotency))
            await self.on_accepted(job)
            return _answer(job.job_id, result.number, validation.node_errors)
        return await self._not_created(result.status, result.job_id, validation.node_errors)

    async def _validate(self, request: PromptRequest) -> Validation:
        """The prompt checked against the catalogue; a file no cached list has is asked of
        the workers once (it may have been added since) before the prompt is refused."""
        validation = self.catalog.validate(request.prompt, request.targets)
        if self.refresh_catalog is None or not _names_unlisted_value(validation):
            return validation
        if not await self.refresh_catalog():
            return validation
        return self.catalog.validate(request.prompt, request.targets)

    def _new_job(
        self, request: PromptRequest, prompt: dict[str, Any], outputs: list[str]
    ) -> NewJob:
        checkpoint, keys, units = self.catalog.placement_facts(prompt)
        eligible = self._eligible(prompt, outputs, request.group)
        all_outputs = request.targets is None and len(outputs) == _output_count(
            prompt, self.catalog
        )
        return NewJob(
            job_id=request.prompt_id or str(uuid.uuid4()),
            prompt=prompt,
            extra_data=request.extra_data,
            client_id=request.client_id,
            outputs=tuple(outputs),
            placement=Placement(checkpoint, keys, units, request.group, tuple(sorted(eligible))),
            priority=request.priority,
            front=request.front,
            number=request.number,
            targets=None if all_outputs else tuple(outputs),
        )

    def _eligible(
        self, prompt: dict[str, Any], outputs: list[str], group: str | None
    ) -> frozenset[str]:
        able = self.catalog.capable(prompt, outputs)
        groups = self.groups()
        if group is not None:
            if group not in groups.values():
                known = ", ".join(sorted(set(groups.values())))
                raise BadRequest(
                    f"no worker in group {group!r} (groups: {known})", kind="invalid_group"
                )
            able = frozenset(name for name in able if groups.get(name) == group)
        if not able:
            raise BadRequest(
                "no single worker offers every node class and file this prompt uses",
                kind="no_capable_worker",
            )
        return able

    async def _not_created(
        self, status: EnqueueStatus, job_id: str, node_errors: dict[str, Any]
    ) -> dict[str, Any]:
        if status is EnqueueStatus.ID_IN_USE:
            raise BadRequest(f"prompt_id {job_id} is already in use", kind="prompt_id_in_use")
        if status is EnqueueStatus.IDEMPOTENCY_MISMATCH:
            raise Unprocessable(
                "Idempotency-Key was used with a different body", kind="idempotency_key_reused"
            )
        record = await self.store.get(job_id)
        if record is None:
            raise Conflict("the job of this Idempotency-Key expired", kind="idempotency_expired")
        return _answer(job_id, record.number, node_errors)


def _answer(job_id: str, number: float, node_errors: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_id": job_id, "number": display_number(number), "node_errors": node_errors}


def _names_unlisted_value(validation: Validation) -> bool:
    return any(
        error.get("type") == "value_not_in_list"
        for node in validation.node_errors.values()
        for error in node.get("errors") or []
    )


def _output_count(prompt: Mapping[str, Any], catalog: FarmCatalog) -> int:
    return sum(
        1
        for node in prompt.values()
        if isinstance(node, Mapping)
        and isinstance(node.get("class_type"), str)
        and catalog.catalog.is_output_node(node["class_type"])
    )
