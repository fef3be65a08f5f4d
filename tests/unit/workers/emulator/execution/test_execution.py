"""Execution semantics in process: caches, events per client, errors, interrupts, files, costs.

A recording socket registered in the hub sees exactly the frames a WebSocket client would.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.unit.workers.emulator.conftest import (
    Factory,
    no_warmup_profile,
    run_to_history,
    wait_for,
)
from tests.unit.workers.emulator.running import transcript_prompt, txt2img
from workers.comfy.flags import LaunchFlags
from workers.comfy.messages import EventKind
from workers.emulator.card.costmodel import LoadTier
from workers.emulator.card.profiles import load_profile
from workers.emulator.execution import events
from workers.emulator.http.state import Emulator

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """A socket that keeps what it is sent (JSON decoded; binary frames as bytes)."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    async def send_text(self, data: str) -> None:
        self.frames.append(json.loads(data))

    async def send_bytes(self, data: bytes) -> None:
        self.frames.append(bytes(data))

    def json(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict)]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f["data"] for f in self.json() if f["type"] == kind]

    def executing(self) -> list[str | None]:
        return [data["node"] for data in self.of("executing")]


def listen(emulator: Emulator, sid: str = "c1") -> Recorder:
    recorder = Recorder()
    emulator.hub.connect(sid, recorder)
    return recorder


async def run(
    client: httpx.AsyncClient, emulator: Emulator, prompt: dict[str, Any], **fields: Any
) -> Any:
    """Run a prompt to its end, then let the publisher deliver every frame."""
    entry = await run_to_history(client, {"prompt": prompt, **fields})
    await emulator.hub.drain()
    return entry


async def test_a_new_seed_reuses_the_cached_loader_and_encoders(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    await run(client, emulator, txt2img(seed=1), client_id="c1")
    recorder.frames.clear()
    await run(client, emulator, txt2img(seed=2), client_id="c1")
    assert recorder.of("execution_cached")[0]["nodes"] == ["4", "6", "7", "5"]
    assert recorder.executing() == ["3", "8", "9", None]


async def test_an_identical_prompt_is_fully_cached_with_old_filenames(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    first = await run(client, emulator, txt2img(), client_id="c1")
    recorder.frames.clear()
    again = await run(client, emulator, txt2img(), client_id="c1")
    assert recorder.of("execution_cached")[0]["nodes"] == ["4", "6", "7", "5", "3", "8", "9"]
    assert recorder.executing() == [None]
    executed = recorder.of("executed")
    assert executed[0]["output"] == first["outputs"]["9"] == again["outputs"]["9"]
    states = recorder.of("progress_state")
    assert states == [
        {
            "prompt_id": again["prompt"][1],
            "nodes": {
                "9": {
                    "value": 1,
                    "max": 1,
                    "state": "finished",
                    "node_id": "9",
                    "prompt_id": again["prompt"][1],
                    "display_node_id": "9",
                    "parent_node_id": None,
                    "real_node_id": "9",
                }
            },
        }
    ]
    assert len(os.listdir(emulator.dirs.output)) == 1


def loader_runs(recorder: Recorder) -> list[bool]:
    """Per prompt: did the checkpoint loader (node 4) execute?"""
    runs, current = [], False
    for node in recorder.executing():
        if node is None:
            runs.append(current)
            current = False
        elif node == "4":
            current = True
    return runs


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], [True, False, True, True]),
        (["--cache-lru", "8"], [True, False, True, False]),
        (["--cache-none"], [True, True, True, True]),
    ],
)
async def test_cache_modes_decide_when_the_loader_runs_again(
    make_app: Factory, flags: list[str], expected: list[bool]
) -> None:
    client, emulator = await make_app(flags=LaunchFlags.parse(flags))
    recorder = listen(emulator)
    for seed, ckpt in [
        (1, "A.safetensors"),
        (2, "A.safetensors"),
        (3, "B.safetensors"),
        (4, "A.safetensors"),
    ]:
        await run(client, emulator, txt2img(seed=seed, ckpt=ckpt), client_id="c1")
    assert loader_runs(recorder) == expected


async def test_free_memory_drops_the_cache_and_unload_keeps_it(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    await run(client, emulator, txt2img(seed=1), client_id="c1")
    await client.post("/free", json={"unload_models": True})
    await wait_for(lambda: not emulator.engine.residency.resident())
    recorder.frames.clear()
    await run(client, emulator, txt2img(seed=2), client_id="c1")
    assert recorder.of("execution_cached")[0]["nodes"] == ["4", "6", "7", "5"]
    assert emulator.engine.residency.resident() == ("A.safetensors",)
    await client.post("/free", json={"free_memory": True})
    await wait_for(lambda: len(emulator.engine.outputs) == 0)
    recorder.frames.clear()
    await run(client, emulator, txt2img(seed=3), client_id="c1")
    assert recorder.of("execution_cached")[0]["nodes"] == []
    assert "4" in recorder.executing()


async def test_events_go_only_to_the_prompts_client(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    mine, other = listen(emulator, "mine"), listen(emulator, "other")
    await run(client, emulator, txt2img(), client_id="mine")
    assert {f["type"] for f in other.json()} == {"status"}
    assert "execution_success" in {f["type"] for f in mine.json()}


async def test_a_prompt_without_client_broadcasts_only_progress(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    watcher = listen(emulator, "watcher")
    await run(client, emulator, txt2img(steps=2))
    assert {f["type"] for f in watcher.json()} == {"status", "progress", "progress_state"}
    assert [d["value"] for d in watcher.of("progress")] == [1, 2]


async def test_history_is_written_after_success_and_before_the_done_frame(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    """As in ComfyUI: execution_success is emitted before the history write (the race clients
    must handle), the final `executing null` after it."""
    seen: list[tuple[str, bool]] = []
    emit = emulator.hub.emit

    def spying(event: events.Event) -> None:
        if isinstance(event, events.Message) and event.kind in (
            EventKind.EXECUTION_SUCCESS,
            EventKind.EXECUTING,
        ):
            prompt_id = event.data.get("prompt_id")
            if event.kind == EventKind.EXECUTION_SUCCESS or event.data["node"] is None:
                seen.append((event.kind.value, bool(emulator.queue.history(prompt_id=prompt_id))))
        emit(event)

    emulator.hub.emit = spying  # type: ignore[method-assign]
    await run(client, emulator, txt2img(), client_id="c1")
    assert seen == [("execution_success", False), ("executing", True)]


async def test_a_failing_node_sends_comfyuis_execution_error(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    emulator.faults.update({"fail_node": "KSampler", "fail_message": "CUDA error: boom"})
    entry = await run(client, emulator, txt2img(), client_id="c1")
    assert [f["type"] for f in recorder.json()[-3:]] == ["execution_error", "status", "executing"]
    error = recorder.of("execution_error")[0]
    assert list(error) == [
        "prompt_id",
        "node_id",
        "node_type",
        "executed",
        "exception_message",
        "exception_type",
        "traceback",
        "current_inputs",
        "current_outputs",
        "timestamp",
    ]
    assert (error["node_id"], error["node_type"]) == ("3", "KSampler")
    assert error["exception_message"] == "CUDA error: boom\n"
    assert error["exception_type"] == "RuntimeError"
    assert error["executed"] == ["4", "5", "7", "6"]
    assert error["current_inputs"]["seed"] == [1]
    assert sorted(error["current_outputs"]) == sorted(transcript_prompt())
    assert all(isinstance(line, str) for line in error["traceback"])
    assert entry["status"]["status_str"] == "error"
    assert entry["outputs"] == {}


async def test_a_failed_prompt_still_evicts_the_previous_loader(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    recorder = listen(emulator)
    await run(client, emulator, txt2img(ckpt="A.safetensors"), client_id="c1")
    emulator.faults.update({"fail_node": "4"})
    await run(client, emulator, txt2img(ckpt="B.safetensors"), client_id="c1")
    recorder.frames.clear()
    await run(client, emulator, txt2img(ckpt="A.safetensors", seed=5), client_id="c1")
    assert recorder.of("execution_cached")[0]["nodes"] == ["5"]  # the latent was shared
    assert recorder.executing()[0] == "4"


async def test_save_image_counters_and_subfolders(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    folder = Path(emulator.dirs.output) / "a"
    folder.mkdir(parents=True)
    (folder / "b_00007_.png").write_bytes(b"")
    (folder / "bx_00050_.png").write_bytes(b"")
    prompt: dict[str, Any] = {
        "1": {
            "class_type": "EmptyImage",
            "inputs": {"width": 8, "height": 8, "batch_size": 2, "color": 1},
        },
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "a/b"}},
    }
    entry = await run(client, emulator, prompt)
    assert entry["outputs"]["2"]["images"] == [
        {"filename": "b_00008_.png", "subfolder": "a", "type": "output"},
        {"filename": "b_00009_.png", "subfolder": "a", "type": "output"},
    ]
    prompt["2"]["inputs"]["filename_prefix"] = "../escape"
    failed = await run(client, emulator, prompt)
    assert failed["status"]["messages"][-1][0] == "execution_error"


async def test_preview_image_writes_to_temp(client: httpx.AsyncClient, emulator: Emulator) -> None:
    prompt = {
        "1": {
            "class_type": "EmptyImage",
            "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 1},
        },
        "2": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}},
    }
    entry = await run(client, emulator, prompt)
    image = entry["outputs"]["2"]["images"][0]
    assert image["type"] == "temp"
    assert image["filename"].startswith("ComfyUI_temp_")
    assert (Path(emulator.dirs.temp) / image["filename"]).is_file()
    assert (await client.get("/view", params=image)).status_code == 200


GENERIC = {
    "1": {
        "class_type": "EmptyImage",
        "inputs": {"width": 32, "height": 16, "batch_size": 1, "color": 5},
    },
    "2": {
        "class_type": "ImageScale",
        "inputs": {
            "image": ["1", 0],
            "upscale_method": "area",
            "width": 64,
            "height": 48,
            "crop": "disabled",
        },
    },
    "3": {"class_type": "ImageBlur", "inputs": {"image": ["2", 0], "blur_radius": 2, "sigma": 1.0}},
    "4": {"class_type": "ImageToMask", "inputs": {"image": ["3", 0], "channel": "red"}},
    "5": {"class_type": "MaskToImage", "inputs": {"mask": ["4", 0]}},
    "6": {"class_type": "ImageBatch", "inputs": {"image1": ["5", 0], "image2": ["3", 0]}},
    "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "generic"}},
    "8": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}},
}


async def test_any_catalogue_nodes_execute_with_plausible_outputs(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    entry = await run(client, emulator, GENERIC)
    assert entry["status"]["status_str"] == "success"
    saved = entry["outputs"]["7"]["images"][0]
    with Image.open(Path(emulator.dirs.output) / saved["filename"]) as image:
        assert image.size == (64, 48)
    assert set(entry["outputs"]) == {"7", "8"}


async def test_previews_follow_the_negotiated_flags(make_app: Factory) -> None:
    client, emulator = await make_app(flags=LaunchFlags.parse(["--preview-method", "auto"]))
    modern, legacy = listen(emulator, "modern"), listen(emulator, "legacy")
    await emulator.hub.on_text(
        "modern",
        json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}}),
        True,
    )
    await run(client, emulator, txt2img(steps=2), client_id="modern")
    await run(client, emulator, txt2img(steps=2, seed=9), client_id="legacy")
    binary = [f for f in modern.frames if isinstance(f, bytes)]
    assert len(binary) == 2
    kind, length = struct.unpack(">II", binary[0][:8])
    meta = json.loads(binary[0][8 : 8 + length])
    assert kind == 4
    assert meta["node_id"] == "3" and meta["image_type"] == "image/jpeg"
    assert binary[0][8 + length : 8 + length + 2] == b"\xff\xd8"
    order = [f["type"] if isinstance(f, dict) else "binary" for f in modern.frames]
    step = order.index("binary")
    assert order[step - 1 : step + 2] == ["progress_state", "binary", "progress"]
    legacy_binary = [f for f in legacy.frames if isinstance(f, bytes)]
    assert [struct.unpack(">II", f[:8]) for f in legacy_binary] == [(1, 1), (1, 1)]
    legacy_order = [f["type"] if isinstance(f, dict) else "binary" for f in legacy.frames]
    step = legacy_order.index("binary")
    assert legacy_order[step - 1] == "progress"


async def test_durations_come_from_the_cost_model(make_app: Factory) -> None:
    slept: list[float] = []
    now = [0.0]

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    client, emulator = await make_app(sleep=sleep, clock=lambda: now[0], time_scale=0.5)
    await run(client, emulator, txt2img(steps=3))
    costs = emulator.engine.costs
    scale = 0.5
    read = costs.read_s("sd15", LoadTier.DISK) * scale
    before_steps = (costs.upload_s("sd15") + costs.first_job_penalty_s()) * scale
    step = costs.sample_step_s("sd15", 64 * 64 / 2**20, 1) * scale
    expected = [read, costs.node_s() * scale, costs.clip_encode_s("sd15") * scale]
    expected += [costs.clip_encode_s("sd15") * scale, before_steps, step, step, step]
    assert slept[: len(expected)] == pytest.approx(expected)
    assert not emulator.engine.instance.first_job_pending


async def test_each_prompt_logs_its_duration(
    client: httpx.AsyncClient, emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await run(client, emulator, txt2img())
    messages = [r.getMessage() for r in caplog.records]
    assert "got prompt" in messages
    assert any(m.startswith("Prompt executed in ") and m.endswith(" seconds") for m in messages)


async def test_interrupt_at_a_step_sends_execution_interrupted(make_app: Factory) -> None:
    client, emulator = await make_app(time_scale=1.0, profile=no_warmup_profile())
    recorder = listen(emulator)
    prompt_id = (
        await client.post("/prompt", json={"prompt": txt2img(steps=10000), "client_id": "c1"})
    ).json()["prompt_id"]
    await wait_for(lambda: emulator.engine.instance.steps_sampled > 0)
    await client.post("/interrupt", json={"prompt_id": prompt_id})
    await wait_for(lambda: emulator.queue.history(prompt_id=prompt_id))
    await emulator.hub.drain()
    await wait_for(lambda: recorder.executing()[-1:] == [None])
    tail = [f["type"] for f in recorder.json()[-3:]]
    assert tail == ["execution_interrupted", "status", "executing"]
    data = recorder.of("execution_interrupted")[0]
    assert list(data) == ["prompt_id", "node_id", "node_type", "executed", "timestamp"]


async def test_partial_execution_targets_run_only_the_listed_outputs(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    prompt = dict(GENERIC)
    entry = await run(client, emulator, prompt, partial_execution_targets=["8"])
    assert entry["prompt"][4] == ["8"]
    assert set(entry["outputs"]) == {"8"}
    refused = await client.post(
        "/prompt", json={"prompt": prompt, "partial_execution_targets": ["3"]}
    )
    assert refused.json()["error"]["type"] == "prompt_no_outputs"


def png_text(emulator: Emulator, image: dict[str, str]) -> dict[str, str]:
    path = Path(emulator.dirs.output, image["subfolder"], image["filename"])
    with Image.open(path) as png:
        text: dict[str, str] = dict(png.text)  # type: ignore[attr-defined]
        return text


async def test_saved_pngs_carry_the_prompt_and_extra_pnginfo(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    extra = {"extra_pnginfo": {"workflow": {"nodes": [1]}, "note": "n"}}
    entry = await run(client, emulator, txt2img(), extra_data=extra)
    text = png_text(emulator, entry["outputs"]["9"]["images"][0])
    assert list(text) == ["prompt", "workflow", "note"]
    assert json.loads(text["workflow"]) == {"nodes": [1]}
    assert json.loads(text["prompt"]) == entry["prompt"][2]


async def test_disable_metadata_writes_bare_pngs(make_app: Factory) -> None:
    client, emulator = await make_app(disable_metadata=True)
    entry = await run(client, emulator, txt2img(), extra_data={"extra_pnginfo": {"w": 1}})
    assert png_text(emulator, entry["outputs"]["9"]["images"][0]) == {}


async def emulated_seconds(make_app: Factory, flags: list[str], ckpts: list[str]) -> list[float]:
    """Emulated seconds of each prompt (time scale 1, nothing really slept)."""
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    client, emulator = await make_app(
        sleep=sleep, clock=lambda: now[0], time_scale=1.0, flags=LaunchFlags.parse(flags)
    )
    spent = []
    for seed, ckpt in enumerate(ckpts):
        before = now[0]
        await run(client, emulator, txt2img(seed=seed, ckpt=ckpt, steps=20))
        spent.append(now[0] - before)
    return spent


async def test_lru_cache_makes_a_return_to_a_checkpoint_cheap(make_app: Factory) -> None:
    ckpts = ["A.safetensors", "sd_xl_base_1.0.safetensors", "A.safetensors"]
    classic = await emulated_seconds(make_app, [], ckpts)
    lru = await emulated_seconds(make_app, ["--cache-lru", "8"], ckpts)
    assert classic[0] > classic[2] > lru[2]  # first job > reload from page cache > resident
    assert classic[2] - lru[2] > 0.1


@pytest.mark.parametrize(
    ("flags", "ckpt", "black"),
    [
        (["--fp16-vae"], "sd_xl_base_1.0.safetensors", True),
        (["--fp16-vae"], "A.safetensors", False),
        (["--fp32-vae"], "sd_xl_base_1.0.safetensors", False),
    ],
)
async def test_sdxls_vae_in_fp16_decodes_black_images_on_the_rtx4070ti(
    make_app: Factory, flags: list[str], ckpt: str, black: bool
) -> None:
    client, emulator = await make_app(
        profile=load_profile("rtx4070ti"), flags=LaunchFlags.parse(flags)
    )
    entry = await run(client, emulator, txt2img(ckpt=ckpt, steps=1))
    saved = entry["outputs"]["9"]["images"][0]
    with Image.open(Path(emulator.dirs.output) / saved["filename"]) as image:
        # Pillow leaves getextrema unannotated.
        extrema = image.convert("L").getextrema()  # type: ignore[no-untyped-call]
        assert (extrema == (0, 0)) is black
