"""Jobs as `/api/jobs` shows them, built from queue items and history entries."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.api.joblist import JobQuery, JobStatus, history_job, outputs_summary, queue_job, select


def entry(status_str: str, *events: tuple[str, int], outputs: Any = None) -> dict[str, Any]:
    extra = {"client_id": "c", "extra_pnginfo": {"workflow": {"id": "wf-1"}}}
    messages = [[name, {"prompt_id": "p", "timestamp": at}] for name, at in events]
    return {
        "prompt": [7, "p", {"1": {}}, extra, ["9"]],
        "outputs": outputs or {},
        "status": {
            "status_str": status_str,
            "completed": status_str == "success",
            "messages": messages,
        },
        "meta": {},
    }


@pytest.mark.parametrize(
    ("status_str", "last", "expected"),
    [
        ("success", "execution_success", JobStatus.COMPLETED),
        ("error", "execution_error", JobStatus.FAILED),
        ("error", "execution_interrupted", JobStatus.CANCELLED),
    ],
)
def test_a_history_entry_becomes_a_job_with_its_outcome_and_times(
    status_str: str, last: str, expected: JobStatus
) -> None:
    job = history_job("p", entry(status_str, ("execution_start", 100), (last, 250)), 90)
    assert job["status"] == expected
    assert (job["priority"], job["create_time"], job["workflow_id"]) == (7, 90, "wf-1")
    assert (job["execution_start_time"], job["execution_end_time"]) == (100, 250)
    assert ("execution_error" in job) == (expected is JobStatus.FAILED)
    assert "workflow" not in job  # only the detail carries the workflow


def test_the_detail_adds_outputs_status_and_workflow() -> None:
    outputs = {"9": {"images": [{"filename": "a.png", "subfolder": "w0", "type": "output"}]}}
    job = history_job("p", entry("success", outputs=outputs), None, detail=True)
    assert job["outputs"] == outputs
    assert job["execution_status"]["status_str"] == "success"
    assert job["workflow"] == {"prompt": {"1": {}}, "extra_data": entry("success")["prompt"][3]}
    assert "create_time" not in job  # unknown values are left out


def test_a_queued_prompt_counts_no_outputs() -> None:
    job = queue_job([3, "q", {}, {"create_time": 5}, []], JobStatus.PENDING, 1)
    assert job == {
        "id": "q", "status": "pending", "priority": 3, "create_time": 5,
        "outputs_count": 0, "previewable_outputs_count": 0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("outputs", "count", "preview"),
    [
        ({}, 0, None),
        # A saved image wins over a temp preview listed first.
        (
            {
                "5": {"images": [{"filename": "t.png", "type": "temp"}]},
                "9": {"images": [{"filename": "s.png", "type": "output"}]},
            },
            2,
            "s.png",
        ),
        ({"5": {"images": [{"filename": "t.png", "type": "temp"}]}}, 1, "t.png"),
        # A bare 3D file name is a file; text strings preview only when nothing else does.
        ({"3": {"3d": ["mesh.glb"], "text": ["hello"]}}, 1, "mesh.glb"),
        ({"3": {"text": ["hello"], "animated": [True]}}, 0, None),
    ],
)
def test_outputs_are_counted_and_the_best_preview_chosen(
    outputs: dict[str, Any], count: int, preview: str | None
) -> None:
    counted, chosen = outputs_summary(outputs)
    assert counted == count
    assert (chosen or {}).get("filename") == preview


def test_text_alone_is_the_preview_truncated() -> None:
    _, chosen = outputs_summary({"3": {"text": ["x" * 2000]}})
    assert chosen is not None
    assert (len(chosen["content"]), chosen["truncated"], chosen["nodeId"]) == (1024, True, "3")


def test_select_filters_sorts_and_pages() -> None:
    jobs = [
        {"id": str(i), "status": "completed" if i % 2 else "failed", "create_time": i}
        for i in range(6)
    ]
    page, total = select(jobs, JobQuery(statuses=frozenset({JobStatus.COMPLETED}), limit=2))
    assert ([job["id"] for job in page], total) == (["5", "3"], 3)
    page, total = select(jobs, JobQuery(descending=False, offset=4))
    assert ([job["id"] for job in page], total) == (["4", "5"], 6)
