"""ComfyUI's jobs API over the farm: `GET /api/jobs`, `GET /api/jobs/{id}`, and cancelling.

The list holds the farm's running and waiting prompts and its history. History is in the
order jobs finished: sorted by creation time with every history status asked for (what the
web frontend asks), the page is read from that order and only its entries are loaded; any
other filter or order reads every entry.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway.api.compat import current_queue, json_body
from gateway.api.deps import Context, Ctx
from gateway.api.joblist import (
    HISTORY_STATUSES,
    SORT_KEYS,
    JobQuery,
    JobStatus,
    history_job,
    page_body,
    queue_job,
    select,
)
from gateway.jobs.models import JobRecord, JobState

router = APIRouter()

CANCELLABLE = frozenset({JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING})


class QueryError(ValueError):
    """A query parameter ComfyUI refuses, with its message."""


@router.get("/api/jobs")
async def list_jobs(request: Request, ctx: Ctx) -> Response:
    try:
        query = parse_query(dict(request.query_params))
    except QueryError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    queued = await _queue_jobs(ctx, query)
    if _history_in_order(query):
        jobs, total = await _ordered_page(ctx, queued, query)
    else:
        jobs, total = select([*queued, *await _history_jobs(ctx, None)], query)
    return JSONResponse(page_body(jobs, total, query))


@router.get("/api/jobs/{job_id}")
async def get_job(job_id: str, ctx: Ctx) -> Response:
    entry = await ctx.store.entry(job_id)
    record = await ctx.store.get(job_id)
    if entry is not None:
        job = history_job(job_id, json.loads(entry), _created(record), detail=True)
        return JSONResponse(job)
    if record is not None and record.state in CANCELLABLE:
        return JSONResponse(_as_queued(record, detail=True))
    return JSONResponse({"error": "Job not found"}, status_code=404)


@router.post("/api/jobs/{job_id}/cancel")
async def cancel_job(job_id: str, ctx: Ctx) -> Response:
    """Interrupt it where it runs, drop it while it waits; a finished or unknown id: a no-op."""
    return JSONResponse({"cancelled": await _cancel(ctx, job_id)})


@router.post("/api/jobs/cancel")
async def cancel_jobs(request: Request, ctx: Ctx) -> Response:
    data = await json_body(request)
    job_ids = data.get("job_ids") if isinstance(data, dict) else None
    if not isinstance(job_ids, list):
        return JSONResponse({"error": "job_ids must be a list"}, status_code=400)
    invalid = [repr(i) for i in job_ids if not isinstance(i, str) or not i]
    if invalid:
        body = {"error": "job_ids contains invalid id(s)", "invalid_ids": invalid}
        return JSONResponse(body, status_code=400)
    cancelled = [await _cancel(ctx, job_id) for job_id in job_ids]
    return JSONResponse({"cancelled": any(cancelled)})


def parse_query(params: dict[str, str]) -> JobQuery:
    """The query of `GET /api/jobs`, refused as ComfyUI refuses it."""
    sort_by = params.get("sort_by", "created_at").lower()
    sort_order = params.get("sort_order", "desc").lower()
    if sort_by not in SORT_KEYS:
        raise QueryError("sort_by must be 'created_at' or 'execution_duration'")
    if sort_order not in ("asc", "desc"):
        raise QueryError("sort_order must be 'asc' or 'desc'")
    return JobQuery(
        statuses=_statuses(params.get("status")),
        workflow_id=params.get("workflow_id") or None,
        sort_by=sort_by,
        descending=sort_order == "desc",
        limit=_limit(params.get("limit")),
        offset=_offset(params.get("offset")),
    )


def _statuses(value: str | None) -> frozenset[JobStatus]:
    asked = [part.strip().lower() for part in (value or "").split(",") if part.strip()]
    if not asked:
        return frozenset(JobStatus)
    valid = [status.value for status in JobStatus]
    invalid = [status for status in asked if status not in valid]
    if invalid:
        raise QueryError(
            f"Invalid status value(s): {', '.join(invalid)}. Valid values: {', '.join(valid)}"
        )
    return frozenset(JobStatus(status) for status in asked)


def _limit(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        limit = int(value)
    except ValueError:
        raise QueryError("limit must be an integer") from None
    if limit <= 0:
        raise QueryError("limit must be a positive integer")
    return limit


def _offset(value: str | None) -> int:
    if value is None:
        return 0
    try:
        return max(int(value), 0)
    except ValueError:
        raise QueryError("offset must be an integer") from None


async def _queue_jobs(ctx: Context, query: JobQuery) -> list[dict[str, Any]]:
    running, waiting = await current_queue(ctx)
    jobs = [_as_queued(job) for job in running] if JobStatus.IN_PROGRESS in query.statuses else []
    if JobStatus.PENDING in query.statuses:
        jobs += [_as_queued(job) for job in waiting]
    return jobs


def _as_queued(record: JobRecord, *, detail: bool = False) -> dict[str, Any]:
    status = JobStatus.IN_PROGRESS if record.state is JobState.RUNNING else JobStatus.PENDING
    item = json.loads(record.queue_item_json())
    return queue_job(item, status, record.enqueued_at_ms, detail=detail)


def _history_in_order(query: JobQuery) -> bool:
    return (
        query.sort_by == "created_at"
        and not query.workflow_id
        and query.history_statuses in (HISTORY_STATUSES, frozenset())
    )


async def _ordered_page(
    ctx: Context, queued: list[dict[str, Any]], query: JobQuery
) -> tuple[list[dict[str, Any]], int]:
    """The page of [queue newest first, history newest first] (descending) or of [history
    oldest first, queue oldest first] (ascending), loading only the history entries shown."""
    queued, _ = select(queued, JobQuery(statuses=query.statuses, descending=query.descending))
    count = await ctx.store.history_count() if query.history_statuses else 0
    total = len(queued) + count
    stop = total if query.limit is None else min(total, query.offset + query.limit)
    # Each position is ("queue", index) or ("history", index in the history's own order).
    positions = [
        _position(i, len(queued), count, query.descending) for i in range(query.offset, stop)
    ]
    indexes = [index for where, index in positions if where == "history"]
    history: dict[int, dict[str, Any]] = {}
    if indexes:
        first, last = min(indexes), max(indexes)
        ids = await ctx.store.history_ids(first, last)
        jobs = {job["id"]: job for job in await _history_jobs(ctx, ids)}
        history = {first + n: jobs[i] for n, i in enumerate(ids) if i in jobs}
    page = [queued[index] if where == "queue" else history.get(index) for where, index in positions]
    return [job for job in page if job is not None], total


def _position(i: int, queued: int, count: int, descending: bool) -> tuple[str, int]:
    if descending:
        return ("queue", i) if i < queued else ("history", count - 1 - (i - queued))
    return ("history", i) if i < count else ("queue", i - count)


async def _history_jobs(ctx: Context, ids: list[str] | None) -> list[dict[str, Any]]:
    """History entries as jobs, in history order (all of them when `ids` is None)."""
    ids = await ctx.store.history_ids(0, -1) if ids is None else ids
    entries = await ctx.store.entries(ids)
    records = {record.job_id: record for record in await ctx.store.get_many(ids)}
    return [
        history_job(job_id, json.loads(entry), _created(records.get(job_id)))
        for job_id, entry in zip(ids, entries, strict=True)
        if entry is not None
    ]


def _created(record: JobRecord | None) -> int | None:
    return record.enqueued_at_ms if record is not None else None


async def _cancel(ctx: Context, job_id: str) -> bool:
    record = await ctx.store.get(job_id)
    if record is None or record.state not in CANCELLABLE:
        return False
    await ctx.farm.operations.interrupt(job_id)
    return True
