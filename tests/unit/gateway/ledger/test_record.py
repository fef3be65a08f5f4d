"""A job's phase ledger from its node clock."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gateway.learning.timing import NodeClock, on_cached, on_executing, started
from gateway.ledger.record import MAX_NODES, Placed, Times, inputs_of, ledger, phase_of, shape_of

TRANSCRIPT = Path(__file__).parents[3] / "contract" / "ws_transcript.json"


def graph() -> dict[str, Any]:
    data = json.loads(TRANSCRIPT.read_text())
    prompt: dict[str, Any] = data["responses"]["queue_during"]["queue_running"][0][2]
    return copy.deepcopy(prompt)


PLACED = Placed(worker="sim0", group="fp16", args=("--fp16-vae",), attempt=1, process_job=2)
TIMES = Times(
    job_id="j1", enqueued_at_ms=1_000, claimed_at_ms=1_250, finished_at_ms=4_000, dispatch_s=0.05
)


def of(prompt: dict[str, Any], clock: NodeClock | None, placed: Placed = PLACED) -> Any:
    return ledger(prompt, json.dumps(prompt), clock, placed, TIMES, checkpoint=None, state="ok")


def test_node_classes_map_to_phases() -> None:
    assert phase_of("CheckpointLoaderSimple") == "load"
    assert phase_of("LoraLoader") == "load"
    assert phase_of("UNETLoader") == "load"
    assert phase_of("CLIPTextEncodeSDXL") == "encode"
    assert phase_of("KSamplerAdvanced") == "sample"
    assert phase_of("SamplerCustomAdvanced") == "sample"
    assert phase_of("VAEDecodeTiled") == "decode"
    assert phase_of("SaveImage") == "save"
    assert phase_of("PreviewImage") == "save"
    assert phase_of("EmptyLatentImage") == "other"
    assert phase_of(None) == "other"


def test_the_shape_ignores_seeds_and_texts_but_not_the_graph() -> None:
    a, b = graph(), graph()
    b["3"]["inputs"]["seed"] = 12345
    b["6"]["inputs"]["text"] = "another picture"
    assert shape_of(a) == shape_of(b)
    assert inputs_of(json.dumps(a)) != inputs_of(json.dumps(b))
    b["3"]["inputs"]["steps"] = 3
    assert shape_of(a) != shape_of(b)


def test_executed_nodes_are_summed_per_phase_and_cached_ones_listed() -> None:
    prompt = graph()
    clock = started({"timestamp": 0}, 10.0)
    clock = on_cached(clock, ["4", "6", "7"])
    for node, at in (("5", 10.1), ("3", 10.2), ("8", 11.2), ("9", 11.5)):
        clock = on_executing(clock, node, at)
    clock = on_executing(clock, None, 11.6)
    body = ledger(
        prompt,
        json.dumps(prompt),
        clock,
        PLACED,
        TIMES,
        checkpoint="sdxl_b.safetensors",
        state="success",
    )
    phases = body["phases"]
    assert phases["sample"] == 1.0
    assert round(phases["decode"], 6) == 0.3
    assert round(phases["save"], 6) == 0.1
    assert phases["load"] == 0.0 and phases["encode"] == 0.0
    # EmptyLatentImage and the 0.1 s before the first node ran
    assert round(phases["other"], 6) == 0.2
    assert abs(sum(phases.values()) - body["exec_s"]) < 1e-6
    assert body["cached"] == ["4", "6", "7"]
    assert body["loaded"] is False
    assert body["cold"] is False
    assert body["queue_s"] == 0.25
    assert body["total_s"] == 3.0
    assert body["family"] == "sdxl"
    assert body["nodes"]["3"] == ["KSampler", "sample", 1.0]
    assert body["group"] == "fp16" and body["args"] == ["--fp16-vae"]


def test_a_job_that_loaded_or_came_first_on_its_process_is_cold() -> None:
    prompt = graph()
    clock = started({}, 0.0)
    for node, at in (("4", 0.0), ("3", 2.0)):
        clock = on_executing(clock, node, at)
    clock = on_executing(clock, None, 3.0)
    body = ledger(
        prompt, json.dumps(prompt), clock, PLACED, TIMES, checkpoint=None, state="success"
    )
    assert body["loaded"] is True and body["cold"] is True
    assert body["phases"]["load"] == 2.0
    first = Placed("sim0", "g", (), 1, process_job=1)
    cached = on_executing(on_cached(started({}, 0.0), ["4"]), None, 1.0)
    assert (
        ledger(prompt, json.dumps(prompt), cached, first, TIMES, checkpoint=None, state="success")[
            "cold"
        ]
        is True
    )


def test_a_job_without_events_has_an_untimed_ledger() -> None:
    body = of(graph(), None)
    assert body["timed"] is False
    assert body["exec_s"] is None
    assert sum(body["phases"].values()) == 0.0


def test_a_huge_graph_lists_only_its_slowest_nodes() -> None:
    prompt = {str(i): {"class_type": "Note", "inputs": {}} for i in range(500)}
    clock = started({}, 0.0)
    for i in range(500):
        clock = on_executing(clock, str(i), i * 0.01 + (0.5 if i == 7 else 0.0))
    clock = on_executing(clock, None, 10.0)
    body = ledger(
        prompt, json.dumps(prompt), clock, PLACED, TIMES, checkpoint=None, state="success"
    )
    assert len(body["nodes"]) == MAX_NODES
    assert "6" in body["nodes"]  # 6 ran 0.51 s, the slowest
    assert len(json.dumps(body)) < 8_000
