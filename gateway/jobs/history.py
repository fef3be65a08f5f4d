"""History entries as clients see them, and the namespacing of output files per worker.

Every worker has its own output and temp directories, so two workers can both write
`ComfyUI_00001_.png`. The gateway reports such files with the worker's name as the first
part of `subfolder` (`"sim0"`, or `"sim0/portraits"` for a file ComfyUI saved under
`portraits/`), in `executed` events and in history alike; `GET /view` takes that first part
off again and streams the file from that worker. Worker names are stable (configured, and the
output folder is per name under the data dir), so a name stays valid across gateway restarts.
Input files are shared by all workers and are not namespaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.jobs.models import JobRecord, JobState, display_number

NAMESPACED_TYPES = frozenset({"output", "temp"})
SENSITIVE_EXTRA = ("auth_token_comfy_org", "api_key_comfy_org")


def namespace_output(output: Mapping[str, Any], worker: str) -> dict[str, Any]:
    """A node's UI output with the worker prefixed to the subfolder of each file it lists."""
    return {key: _namespace_value(value, worker) for key, value in output.items()}


def _namespace_value(value: Any, worker: str) -> Any:
    if not isinstance(value, list):
        return value
    return [_namespace_file(item, worker) for item in value]


def _namespace_file(item: Any, worker: str) -> Any:
    if not (isinstance(item, dict) and "filename" in item):
        return item
    if item.get("type", "output") not in NAMESPACED_TYPES:
        return item
    subfolder = str(item.get("subfolder") or "")
    return {**item, "subfolder": f"{worker}/{subfolder}" if subfolder else worker}


def split_namespace(subfolder: str) -> tuple[str, str]:
    """`"sim0/portraits"` -> `("sim0", "portraits")`; `"sim0"` -> `("sim0", "")`."""
    head, _, rest = subfolder.strip("/").partition("/")
    return head, rest


def public_extra_data(extra_json: str) -> dict[str, Any]:
    """extra_data as history shows it: ComfyUI drops the API credentials."""
    extra: dict[str, Any] = json.loads(extra_json)
    for key in SENSITIVE_EXTRA:
        extra.pop(key, None)
    return extra


def gateway_entry(worker_entry: Mapping[str, Any], job: JobRecord, worker: str) -> dict[str, Any]:
    """The worker's entry as the client must see it: the gateway's number and id, the client's
    extra_data and namespaced output files. Nothing is added: an entry has ComfyUI's keys only
    (where a job ran and how often is at /gateway/jobs/{id})."""
    prompt = list(worker_entry.get("prompt") or [])
    if len(prompt) >= 5:
        prompt[0] = display_number(job.number)
        prompt[1] = job.job_id
        prompt[3] = public_extra_data(job.extra_json)
    outputs = worker_entry.get("outputs") or {}
    entry = dict(worker_entry)
    entry["prompt"] = prompt
    entry["outputs"] = {node: namespace_output(out, worker) for node, out in outputs.items()}
    return entry


def gateway_block(
    job: JobRecord, attempts: Sequence[Mapping[str, Any]], groups: Mapping[str, str]
) -> dict[str, Any]:
    """What `GET /history/{id}` adds to ComfyUI's entry: where the job ran, its config group,
    every attempt, the job's timestamps (ms since epoch) and its phase ledger."""
    return {
        "worker": job.worker,
        "group": groups.get(job.worker or ""),
        "attempts": len(attempts),
        "attempt_log": list(attempts),
        "state": job.state.value,
        "enqueued_at_ms": job.enqueued_at_ms,
        "started_at_ms": job.started_at_ms,
        "finished_at_ms": job.finished_at_ms,
        "ledger": None if job.ledger_json is None else json.loads(job.ledger_json),
    }


def error_entry(job: JobRecord, now_ms: int, message: str, exception_type: str) -> dict[str, Any]:
    """A history entry for a job that ended without a worker's entry (gave up, refused)."""
    error: dict[str, Any] = {
        "prompt_id": job.job_id,
        "node_id": None,
        "node_type": None,
        "executed": [],
        "exception_message": message,
        "exception_type": exception_type,
        "traceback": [],
        "current_inputs": {},
        "current_outputs": [],
        "timestamp": now_ms,
    }
    extra = _sendable(json.dumps(public_extra_data(job.extra_json)))
    item = [
        display_number(job.number),
        job.job_id,
        _sendable(job.prompt_json),
        extra,
        _sendable(job.outputs_json),
    ]
    return {
        "prompt": item,
        "outputs": {},
        "status": {
            "status_str": "error",
            "completed": False,
            "messages": [["execution_error", error]],
        },
        "meta": {},
    }


STATUS_KINDS = frozenset(
    {"execution_start", "execution_cached", "execution_success", "execution_error",
     "execution_interrupted"}
)  # fmt: skip
"""The events ComfyUI keeps in an entry's `status.messages`."""


@dataclass
class Heard:
    """A run's history entry as its events told it, for when the worker ended the run
    (`executing` null) but died before the gateway read the entry it wrote: the job ran, and
    sending it again would run it twice."""

    messages: list[list[Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def hear(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind in STATUS_KINDS:
            self.messages.append([kind, dict(data)])
        elif kind == "executed" and isinstance(data.get("output"), dict):
            node = str(data.get("node"))
            self.outputs[node] = data["output"]
            self.meta[node] = {
                "node_id": node,
                "display_node": data.get("display_node", node),
                "parent_node": None,
                "real_node_id": node,
            }

    @property
    def ended(self) -> bool:
        """Whether the run's terminal event (success or error) was heard."""
        return any(m[0] in ("execution_success", "execution_error") for m in self.messages)

    def entry(self, job: JobRecord) -> dict[str, Any]:
        success = self.messages[-1][0] == "execution_success" if self.messages else False
        item = [
            display_number(job.number),
            job.job_id,
            _sendable(job.prompt_json),
            public_extra_data(job.extra_json),
            _sendable(job.outputs_json),
        ]
        return {
            "prompt": item,
            "outputs": dict(self.outputs),
            "status": {
                "status_str": "success" if success else "error",
                "completed": success,
                "messages": [list(m) for m in self.messages],
            },
            "meta": dict(self.meta),
        }


def _sendable(stored: str) -> Any:
    """Stored JSON as an entry can carry it to any client: a number JSON has not (NaN) is kept
    as its name, and text that cannot be encoded as UTF-8 (a lone surrogate) as the stored
    text itself. Only jobs that could never be sent to a worker have such values."""
    value = json.loads(stored, parse_constant=str)
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except ValueError:
        return stored
    return value


def entry_client_id(entry_json: str) -> str | None:
    """The client id a history entry's prompt was sent with (in its extra_data)."""
    item = json.loads(entry_json).get("prompt") or []
    extra = item[3] if len(item) > 3 and isinstance(item[3], dict) else {}
    client_id = extra.get("client_id")
    return str(client_id) if client_id is not None else None


def entry_state(entry: Mapping[str, Any]) -> JobState:
    """success, interrupted or error, from an entry's status block."""
    status = entry.get("status") or {}
    if status.get("status_str") == "success":
        return JobState.SUCCESS
    messages = status.get("messages") or []
    if messages and messages[-1] and messages[-1][0] == "execution_interrupted":
        return JobState.INTERRUPTED
    return JobState.ERROR
