"""The emulator as a real process, driven like a ComfyUI client, against the recorded transcript."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from websockets.asyncio.client import ClientConnection, connect

from tests.unit.workers.emulator.running import (
    Running,
    running_emulator,
    transcript,
    transcript_prompt,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_emulator(tmp_path_factory.mktemp("e2e")) as running:
        yield running


@pytest.fixture
async def http(emulator: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=emulator.url, timeout=10) as client:
        yield client


async def frames_until_done(ws: ClientConnection, prompt_id: str) -> list[dict[str, Any]]:
    """Every text frame up to and including `executing {node: null, prompt_id}`."""
    frames = []
    while True:
        raw = await ws.recv()
        assert isinstance(raw, str), "no binary frames without --preview-method"
        frame = json.loads(raw)
        frames.append(frame)
        data = frame["data"]
        done = frame["type"] == "executing" and data.get("node") is None
        if done and data.get("prompt_id") == prompt_id:
            return frames


def normalised(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Frames with timestamps and SaveImage counters blanked (they differ from run to run)."""
    text = json.dumps(frames)
    text = re.sub(r'"timestamp": \d+', '"timestamp": 0', text)
    text = re.sub(r"_\d{5}_\.png", "_NNNNN_.png", text)
    result: list[dict[str, Any]] = json.loads(text)
    return result


@dataclass(frozen=True)
class RecordedRun:
    """The transcript's prompt run once on the emulator, as the recording client saw it."""

    greeting: dict[str, Any]
    response: httpx.Response
    frames: list[dict[str, Any]]
    history: dict[str, Any]


async def replay(emulator: Running) -> RecordedRun:
    """Same client id, same prompt id, same prompt as the recording; history read after the
    final `executing` frame, as ComfyUI's own script examples do."""
    recorded = transcript()
    client_id = recorded["client_id"]
    prompt_id = recorded["responses"]["post_prompt"]["body"]["prompt_id"]
    body = {"prompt": transcript_prompt(), "client_id": client_id, "prompt_id": prompt_id}
    async with (
        httpx.AsyncClient(base_url=emulator.url, timeout=10) as http,
        connect(f"{emulator.ws_url}?clientId={client_id}") as ws,
    ):
        greeting = json.loads(await ws.recv())
        response = await http.post("/prompt", json=body)
        frames = await frames_until_done(ws, prompt_id)
        history = (await http.get(f"/history/{prompt_id}")).json()
    return RecordedRun(greeting, response, frames, history)


@pytest.fixture(scope="module")
def run(emulator: Running) -> RecordedRun:
    return asyncio.run(replay(emulator))


def test_the_prompt_is_accepted_as_recorded(run: RecordedRun) -> None:
    recorded = transcript()
    assert run.greeting == recorded["ws"][0]["msg"]
    assert run.response.status_code == 200
    assert run.response.json() == recorded["responses"]["post_prompt"]["body"]


def test_a_prompt_gives_the_recorded_transcript_frame_for_frame(run: RecordedRun) -> None:
    expected = [entry["msg"] for entry in transcript()["ws"][1:]]
    assert normalised(run.frames) == normalised(expected)


def test_history_after_the_done_frame_matches_the_recorded_entry(run: RecordedRun) -> None:
    recorded = transcript()["responses"]["history_entry"]
    assert normalised([run.history]) == normalised([recorded])


async def test_view_serves_the_written_png_with_comfyui_headers(
    emulator: Running, run: RecordedRun, http: httpx.AsyncClient
) -> None:
    image = next(iter(run.history.values()))["outputs"]["9"]["images"][0]
    response = await http.get("/view", params=image)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.headers["content-disposition"] == f'filename="{image["filename"]}"'
    assert re.fullmatch(r'"[0-9a-f]+-[0-9a-f]+"', response.headers["etag"])
    png = Image.open(io.BytesIO(response.content))
    assert png.format == "PNG"
    assert png.size == (64, 64)
    assert json.loads(png.text["prompt"]) == transcript_prompt()  # type: ignore[attr-defined]
    assert (Path(emulator.output_dir) / image["filename"]).read_bytes() == response.content


async def test_recorded_http_answers_are_reproduced(http: httpx.AsyncClient) -> None:
    recorded = transcript()["responses"]
    unknown = await http.get("/history/no-such-prompt")
    assert (unknown.status_code, unknown.json()) == (200, recorded["history_unknown"]["body"])
    prompt = transcript_prompt()
    prompt["4"]["inputs"]["ckpt_name"] = "missing.safetensors"
    invalid = await http.post("/prompt", json={"prompt": prompt})
    assert (invalid.status_code, invalid.json()) == (400, recorded["post_prompt_invalid"]["body"])
    unknown_class = {"1": {"class_type": "NoSuchNode", "inputs": {}}}
    refused = await http.post("/prompt", json={"prompt": unknown_class})
    assert refused.json() == recorded["post_prompt_unknown_class"]["body"]
    bad = await http.post("/prompt", content=b"{not json")
    assert (bad.status_code, bad.text) == (500, recorded["post_prompt_bad_json"]["body"])
    traversal = await http.get("/view", params={"filename": "../secret.png"})
    assert (traversal.status_code, traversal.text) == (400, "")
