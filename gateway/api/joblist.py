"""Jobs as ComfyUI's `/api/jobs` shows them: one shape for queued, running and finished prompts.

Pure functions over queue items (`[number, id, prompt, extra_data, outputs]`) and history
entries, as ComfyUI's `comfy_execution.jobs` builds them (ComfyUI PR 11054): a list item has
`id`, `status`, `priority` (the queue number), `create_time` (ms), execution times, the
error, output counts and one preview; the detail of one job adds its outputs, its execution
status and its workflow. Keys without a value are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PREVIEWABLE_MEDIA = frozenset({"images", "video", "audio", "3d", "text"})
THREE_D_SUFFIXES = (".obj", ".fbx", ".gltf", ".glb", ".usdz")
TEXT_SUFFIXES = (".txt", ".md", ".json")
TEXT_PREVIEW_CHARS = 1024
ENDED_EVENTS = ("execution_success", "execution_error", "execution_interrupted")


class JobStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


HISTORY_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})
SORT_KEYS = ("created_at", "execution_duration")


@dataclass(frozen=True)
class JobQuery:
    """The filters, order and page of `GET /api/jobs`."""

    statuses: frozenset[JobStatus] = frozenset(JobStatus)
    workflow_id: str | None = None
    sort_by: str = "created_at"
    descending: bool = True
    limit: int | None = None
    offset: int = 0

    @property
    def history_statuses(self) -> frozenset[JobStatus]:
        return self.statuses & HISTORY_STATUSES


def queue_job(
    item: Sequence[Any], status: JobStatus, create_time: int | None, *, detail: bool = False
) -> dict[str, Any]:
    """A queued or running prompt as a job; `detail` adds its workflow."""
    number, job_id, prompt, extra_data = item[0], item[1], item[2], item[3]
    job = _pruned(
        id=job_id,
        status=status.value,
        priority=number,
        create_time=extra_data.get("create_time", create_time),
        outputs_count=0,
        previewable_outputs_count=0,
        workflow_id=_workflow_id(extra_data),
    )
    if detail:
        job["workflow"] = {"prompt": prompt, "extra_data": extra_data}
    return job


def history_job(
    job_id: str, entry: Mapping[str, Any], create_time: int | None, *, detail: bool = False
) -> dict[str, Any]:
    """A finished prompt, from its history entry; `detail` adds outputs, status and workflow."""
    item = entry.get("prompt") or [None, job_id, {}, {}, []]
    extra_data = item[3] if isinstance(item[3], dict) else {}
    status_block = entry.get("status") or {}
    outputs = entry.get("outputs") or {}
    started, ended, error, interrupted = _execution(status_block)
    count, preview = outputs_summary(outputs)
    job = _pruned(
        id=job_id,
        status=_history_status(status_block, interrupted).value,
        priority=item[0],
        create_time=extra_data.get("create_time", create_time),
        execution_start_time=started,
        execution_end_time=ended,
        execution_error=error,
        outputs_count=count,
        previewable_outputs_count=previewable_count(outputs),
        preview_output=preview,
        workflow_id=_workflow_id(extra_data),
    )
    if detail:
        job["outputs"] = normalized_outputs(outputs)
        job["execution_status"] = status_block
        job["workflow"] = {"prompt": item[2], "extra_data": extra_data}
    return job


def select(jobs: Iterable[dict[str, Any]], query: JobQuery) -> tuple[list[dict[str, Any]], int]:
    """The page of `jobs` the query asks for, and how many matched in all."""
    matched = [
        job
        for job in jobs
        if job["status"] in query.statuses
        and (not query.workflow_id or job.get("workflow_id") == query.workflow_id)
    ]
    matched.sort(key=_sort_key(query.sort_by), reverse=query.descending)
    end = None if query.limit is None else query.offset + query.limit
    return matched[query.offset : end], len(matched)


def page_body(jobs: list[dict[str, Any]], total: int, query: JobQuery) -> dict[str, Any]:
    pagination = {
        "offset": query.offset,
        "limit": query.limit,
        "total": total,
        "has_more": query.offset + len(jobs) < total,
    }
    return {"jobs": jobs, "pagination": pagination}


def _sort_key(sort_by: str) -> Callable[[Mapping[str, Any]], int]:
    return _duration if sort_by == "execution_duration" else _create_time


def _create_time(job: Mapping[str, Any]) -> int:
    return int(job.get("create_time") or 0)


def _duration(job: Mapping[str, Any]) -> int:
    start, end = job.get("execution_start_time"), job.get("execution_end_time")
    return int(end - start) if start and end else 0


def _history_status(status_block: Mapping[str, Any], interrupted: bool) -> JobStatus:
    if status_block.get("status_str") == "error":
        return JobStatus.CANCELLED if interrupted else JobStatus.FAILED
    return JobStatus.COMPLETED


def _execution(status_block: Mapping[str, Any]) -> tuple[Any, Any, Any, bool]:
    """(start timestamp, end timestamp, the error event's data, interrupted) of an entry."""
    started = ended = error = None
    interrupted = False
    for message in status_block.get("messages") or []:
        if not (isinstance(message, list | tuple) and len(message) >= 2):
            continue
        event, data = message[0], message[1]
        if not isinstance(data, dict):
            continue
        if event == "execution_start":
            started = data.get("timestamp")
        elif event in ENDED_EVENTS:
            ended = data.get("timestamp")
            error = data if event == "execution_error" else error
            interrupted = interrupted or event == "execution_interrupted"
    return started, ended, error, interrupted


def _workflow_id(extra_data: Mapping[str, Any]) -> Any:
    pnginfo = extra_data.get("extra_pnginfo")
    workflow = pnginfo.get("workflow") if isinstance(pnginfo, dict) else None
    return workflow.get("id") if isinstance(workflow, dict) else None


def _pruned(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


# -- outputs ---------------------------------------------------------------------------------


def _file_item(item: Any) -> dict[str, Any] | None:
    """An output item as a file dict: dicts as they are, a 3D file's bare name as a file."""
    if isinstance(item, dict):
        return item
    if isinstance(item, str) and item.lower().endswith(THREE_D_SUFFIXES):
        return {"filename": item, "type": "output", "subfolder": "", "mediaType": "3d"}
    return None


def _output_lists(outputs: Mapping[str, Any]) -> Iterable[tuple[str, str, list[Any]]]:
    """(node id, media type, items) of every list of files in the outputs."""
    for node_id, node_outputs in outputs.items():
        if not isinstance(node_outputs, dict):
            continue
        for media, items in node_outputs.items():
            if media != "animated" and isinstance(items, list):
                yield node_id, media, items


def normalized_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs with 3D file names as file dicts and empty items dropped."""
    normalized: dict[str, Any] = {}
    for node_id, node_outputs in outputs.items():
        if not isinstance(node_outputs, dict):
            normalized[node_id] = node_outputs
            continue
        normalized[node_id] = {
            media: [_file_item(i) or i for i in items if i is not None]
            if media != "animated" and isinstance(items, list)
            else items
            for media, items in node_outputs.items()
        }
    return normalized


def previewable(media: str, item: Mapping[str, Any]) -> bool:
    if media in PREVIEWABLE_MEDIA:
        return True
    if str(item.get("format") or "").startswith(("video/", "audio/")):
        return True
    return str(item.get("filename") or "").lower().endswith(THREE_D_SUFFIXES + TEXT_SUFFIXES)


def _is_text(media: str, item: Mapping[str, Any]) -> bool:
    return media == "text" or str(item.get("filename") or "").lower().endswith(TEXT_SUFFIXES)


def previewable_count(outputs: Mapping[str, Any]) -> int:
    return sum(
        1
        for _, media, items in _output_lists(outputs)
        for item in items
        if (found := _file_item(item)) is not None and previewable(media, found)
    )


def outputs_summary(outputs: Mapping[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """How many files the outputs list, and the one to preview: a saved visual file first,
    then any visual file (a temp preview), then a saved text file, then raw text."""
    count = 0
    found: dict[str, dict[str, Any]] = {}
    for node_id, media, items in _output_lists(outputs):
        for item in items:
            file = _file_item(item)
            if file is None:
                if media == "text" and item is not None:
                    found.setdefault("text", _text_preview(item, node_id))
                continue
            count += 1
            if previewable(media, file):
                found.setdefault(_preview_rank(media, file), _preview(file, node_id, media))
    for rank in ("saved", "visual", "text_file", "text"):
        if rank in found:
            return count, found[rank]
    return count, None


def _preview_rank(media: str, file: Mapping[str, Any]) -> str:
    if _is_text(media, file):
        return "text_file"
    return "saved" if file.get("type") == "output" else "visual"


def _preview(file: Mapping[str, Any], node_id: str, media: str) -> dict[str, Any]:
    return {"mediaType": media, **file, "nodeId": node_id}


def _text_preview(item: Any, node_id: str) -> dict[str, Any]:
    text = str(item[0] if isinstance(item, tuple | list) and item else item)
    preview: dict[str, Any] = {"content": text[:TEXT_PREVIEW_CHARS]}
    if len(text) > TEXT_PREVIEW_CHARS:
        preview["truncated"] = True
    return {**preview, "nodeId": node_id, "mediaType": "text"}
