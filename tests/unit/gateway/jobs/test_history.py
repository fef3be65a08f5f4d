"""History entries and output namespacing."""

from __future__ import annotations

from gateway.jobs.history import (
    Heard,
    entry_state,
    gateway_entry,
    namespace_output,
    split_namespace,
)
from gateway.jobs.models import JobRecord, JobState, Placement


def record() -> JobRecord:
    return JobRecord(
        job_id="j1",
        state=JobState.RUNNING,
        number=7.0,
        priority=0,
        client_id="c1",
        prompt_json="{}",
        extra_json='{"client_id": "c1", "api_key_comfy_org": "secret"}',
        outputs_json='["9"]',
        targets_json=None,
        placement=Placement(),
        attempt=2,
        failures=1,
        worker="sim0",
        enqueued_at_ms=1,
        claimed_at_ms=2,
        started_at_ms=3,
        finished_at_ms=None,
        error=None,
    )


def test_output_files_get_the_worker_as_first_subfolder_part() -> None:
    output = {
        "images": [
            {"filename": "a.png", "subfolder": "", "type": "output"},
            {"filename": "b.png", "subfolder": "x/y", "type": "temp"},
            {"filename": "c.png", "subfolder": "", "type": "input"},
        ],
        "text": ["hello"],
    }
    spaced = namespace_output(output, "sim0")
    assert [f["subfolder"] for f in spaced["images"]] == ["sim0", "sim0/x/y", ""]
    assert spaced["text"] == ["hello"]
    assert split_namespace("sim0/x/y") == ("sim0", "x/y")
    assert split_namespace("sim0") == ("sim0", "")


def test_gateway_entry_shows_the_clients_number_and_extra_data_and_nothing_more() -> None:
    worker_entry = {
        "prompt": [3, "j1", {"9": {}}, {"client_id": "relay-sid"}, ["9"]],
        "outputs": {"9": {"images": [{"filename": "a.png", "subfolder": "", "type": "output"}]}},
        "status": {"status_str": "success", "completed": True, "messages": []},
        "meta": {},
    }
    entry = gateway_entry(worker_entry, record(), "sim0")
    assert entry["prompt"][0] == 7
    assert entry["prompt"][3] == {"client_id": "c1"}
    assert entry["outputs"]["9"]["images"][0]["subfolder"] == "sim0"
    assert set(entry) == {"prompt", "outputs", "status", "meta"}
    assert entry_state(entry) is JobState.SUCCESS


def test_entry_state_tells_interrupted_from_error() -> None:
    interrupted = {"status": {"status_str": "error", "messages": [["execution_interrupted", {}]]}}
    failed = {"status": {"status_str": "error", "messages": [["execution_error", {}]]}}
    assert entry_state(interrupted) is JobState.INTERRUPTED
    assert entry_state(failed) is JobState.ERROR


def test_an_entry_heard_from_events_is_the_one_the_worker_would_have_written() -> None:
    heard = Heard()
    image = {"filename": "a.png", "subfolder": "", "type": "output"}
    heard.hear("execution_start", {"prompt_id": "j1", "timestamp": 1})
    heard.hear("executing", {"node": "9", "prompt_id": "j1"})  # not kept in an entry
    heard.hear("executed", {"node": "9", "display_node": "9", "output": {"images": [image]}})
    assert not heard.ended
    heard.hear("execution_success", {"prompt_id": "j1", "timestamp": 2})
    assert heard.ended
    entry = gateway_entry(heard.entry(record()), record(), "sim0")
    assert entry["prompt"][:2] == [7, "j1"] and entry["prompt"][3] == {"client_id": "c1"}
    assert entry["outputs"]["9"]["images"][0]["subfolder"] == "sim0"
    assert [m[0] for m in entry["status"]["messages"]] == ["execution_start", "execution_success"]
    assert entry_state(entry) is JobState.SUCCESS
    assert entry["meta"]["9"]["node_id"] == "9"


def test_an_entry_heard_ending_in_an_error_is_an_error() -> None:
    heard = Heard()
    heard.hear("execution_error", {"prompt_id": "j1", "exception_message": "boom"})
    entry = heard.entry(record())
    assert entry_state(entry) is JobState.ERROR and not entry["status"]["completed"]
