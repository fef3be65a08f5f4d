"""Each fault hook of the emulator does what it says, on a real process over real sockets."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from tests.unit.workers.emulator.running import Running, running_emulator, txt2img, until_sampling

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_emulator(tmp_path_factory.mktemp("faults")) as running:
        yield running


@pytest.fixture
async def http(emulator: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=emulator.url, timeout=10) as client:
        yield client
        await client.delete("/emulator/faults")


async def arm(http: httpx.AsyncClient, **faults: Any) -> dict[str, Any]:
    response = await http.post("/emulator/faults", json=faults)
    assert response.status_code == 200, response.text
    snapshot: dict[str, Any] = response.json()
    return snapshot


async def recv_json(ws: ClientConnection, timeout_s: float = 10.0) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout_s))
    return frame


async def timed_frames(ws: ClientConnection, prompt_id: str) -> list[tuple[float, dict[str, Any]]]:
    """(arrival time, frame) up to the prompt's final `executing` frame."""
    frames = []
    while True:
        frame = await recv_json(ws)
        frames.append((time.monotonic(), frame))
        data = frame["data"]
        if frame["type"] == "executing" and data["node"] is None and data["prompt_id"] == prompt_id:
            return frames


async def submit(http: httpx.AsyncClient, prompt: dict[str, Any], client_id: str) -> str:
    response = await http.post("/prompt", json={"prompt": prompt, "client_id": client_id})
    assert response.status_code == 200, response.text
    prompt_id: str = response.json()["prompt_id"]
    return prompt_id


async def history_of(http: httpx.AsyncClient, prompt_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = (await http.get(f"/history/{prompt_id}")).json()
    return entry


async def until_history(
    http: httpx.AsyncClient, prompt_id: str, timeout_s: float = 10.0
) -> dict[str, Any]:
    """Poll the prompt's history until it has an entry (fails after `timeout_s`)."""
    deadline_s = time.monotonic() + timeout_s
    while not (entry := await history_of(http, prompt_id)):
        assert time.monotonic() < deadline_s, f"no history entry for {prompt_id}"
        await asyncio.sleep(0.01)
    return entry


def wait_exit(running: Running, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while running.child.running:
        assert time.monotonic() < deadline, "the emulator did not exit"
        time.sleep(0.02)
    code = running.child.returncode
    assert code is not None
    return code


async def test_crash_at_step_exits_the_process_mid_sampling(tmp_path: Path) -> None:
    with running_emulator(
        tmp_path, "--fault", "crash_at_step=2", "--fault", "crash_exit_code=3"
    ) as running:
        async with (
            connect(f"{running.ws_url}?clientId=c") as ws,
            httpx.AsyncClient(base_url=running.url) as http,
        ):
            await recv_json(ws)
            await submit(http, txt2img(steps=5), "c")
            progress = []
            try:
                while True:
                    frame = await recv_json(ws)
                    if frame["type"] == "progress":
                        progress.append(frame["data"]["value"])
            except Exception:
                pass  # the connection dies with the process
        assert wait_exit(running) == 3
        assert progress == [1]
        assert "fault: exiting with code 3 at step 2" in running.log()


async def test_crash_at_step_zero_exits_before_execution_starts(tmp_path: Path) -> None:
    with running_emulator(tmp_path) as running:
        async with httpx.AsyncClient(base_url=running.url) as http:
            await arm(http, crash_at_step=0)
            await submit(http, txt2img(), "nobody")
        assert wait_exit(running) == 1
        assert not list((tmp_path / "output").glob("*.png"))


async def test_hang_stops_events_but_http_answers(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    await arm(http, hang_s=1.5, hang_at_step=1)
    async with connect(f"{emulator.ws_url}?clientId=h") as ws:
        await recv_json(ws)
        prompt_id = await submit(http, txt2img(steps=3, seed=101), "h")
        reader = asyncio.create_task(timed_frames(ws, prompt_id))
        await until_sampling(http)
        assert (await http.get("/prompt")).json() == {"exec_info": {"queue_remaining": 1}}
        queue = (await http.get("/queue")).json()
        assert [item[1] for item in queue["queue_running"]] == [prompt_id]
        frames = await reader
    times = [t for t, _ in frames]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    longest = gaps.index(max(gaps))
    assert max(gaps) >= 1.0
    assert frames[longest][1]["type"] == "executing"  # silent right after the sampler started
    assert [f["type"] for _, f in frames[-3:]] == ["execution_success", "status", "executing"]


async def test_a_stalled_websocket_holds_frames_while_history_is_written(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    await arm(http, stall_ws_s=1.5)
    async with connect(f"{emulator.ws_url}?clientId=s") as ws:
        await recv_json(ws)
        prompt_id = await submit(http, txt2img(seed=102), "s")
        started = time.monotonic()
        entry = await until_history(http, prompt_id)
        written = time.monotonic() - started
        frames = await timed_frames(ws, prompt_id)
    assert written < 1.0
    assert entry[prompt_id]["status"]["status_str"] == "success"
    kinds = [f["type"] for _, f in frames]
    start = kinds.index("execution_start")
    assert frames[start][0] - started >= 1.3  # everything from the prompt's start was held
    assert kinds[start - 2 : start] == ["status", "status"]  # queued and taken: sent before
    assert kinds[-3:] == ["execution_success", "status", "executing"]  # in order afterwards


async def run_seconds(http: httpx.AsyncClient, prompt: dict[str, Any]) -> float:
    """Server-side duration of a run: execution_start to its last message."""
    prompt_id = await submit(http, prompt, "nobody")
    entry = await until_history(http, prompt_id)
    messages = entry[prompt_id]["status"]["messages"]
    return float(messages[-1][1]["timestamp"] - messages[0][1]["timestamp"]) / 1000


async def test_slow_factor_multiplies_durations(http: httpx.AsyncClient) -> None:
    await run_seconds(http, txt2img(steps=1, seed=200))  # warm: loader and encoders cached
    normal = await run_seconds(http, txt2img(steps=60, seed=201))
    await arm(http, slow_factor=40)
    slow = await run_seconds(http, txt2img(steps=60, seed=202))
    assert slow > 2 * normal
    step_s = 0.026 + 0.05 * 64 * 64 / 2**20  # the h200 profile's SD1.5 step at 64x64
    assert slow >= 0.9 * 60 * step_s * 0.01 * 40


async def test_refuse_503_answers_every_comfyui_route(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    snapshot = await arm(http, refuse="503")
    assert snapshot["refuse"] == "503"
    async with httpx.AsyncClient(base_url=emulator.url) as fresh:
        for path in ("/prompt", "/api/system_stats", "/history"):
            assert (await fresh.get(path)).status_code == 503
    with pytest.raises(InvalidStatus):
        async with connect(f"{emulator.ws_url}?clientId=r"):
            pass
    await http.delete("/emulator/faults")
    assert (await http.get("/prompt")).status_code == 200


async def test_refuse_close_drops_new_connections_for_a_while(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    await arm(http, refuse="close", refuse_for_s=1.0)
    async with httpx.AsyncClient(base_url=emulator.url) as fresh:
        # Closed before any answer: EOF or reset, depending on when the request was sent.
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            await fresh.get("/prompt")
    await asyncio.sleep(1.1)
    async with httpx.AsyncClient(base_url=emulator.url) as fresh:
        assert (await fresh.get("/prompt")).status_code == 200


async def test_fail_node_sends_an_execution_error(
    emulator: Running, http: httpx.AsyncClient
) -> None:
    await arm(
        http,
        fail_node="8",
        fail_message="Allocation on device",
        fail_exception_type="torch.OutOfMemoryError",
    )
    async with connect(f"{emulator.ws_url}?clientId=e") as ws:
        await recv_json(ws)
        prompt_id = await submit(http, txt2img(seed=103), "e")
        frames = [f for _, f in await timed_frames(ws, prompt_id)]
    error = next(f["data"] for f in frames if f["type"] == "execution_error")
    assert (error["node_id"], error["node_type"]) == ("8", "VAEDecode")
    assert (error["exception_message"], error["exception_type"]) == (
        "Allocation on device\n",
        "torch.OutOfMemoryError",
    )
    assert "execution_success" not in [f["type"] for f in frames]
    entry = await history_of(http, prompt_id)
    assert entry[prompt_id]["status"]["status_str"] == "error"
    second = await run_seconds(http, txt2img(seed=104))  # one-shot: the next prompt succeeds
    assert second >= 0


async def test_fail_validation_refuses_the_next_prompts(http: httpx.AsyncClient) -> None:
    snapshot = await arm(http, fail_validation=True, times=2)
    assert snapshot["armed"] == {"fail_validation": {"value": True, "times": 2}}
    for _ in range(2):
        response = await http.post("/prompt", json={"prompt": txt2img(seed=105)})
        assert response.status_code == 400
        body = response.json()
        assert body["error"]["type"] == "prompt_outputs_failed_validation"
        assert body["node_errors"]["9"]["errors"][0]["type"] == "custom_validation_failed"
    assert (await http.post("/prompt", json={"prompt": txt2img(seed=106)})).status_code == 200


async def test_fault_requests_are_checked(http: httpx.AsyncClient) -> None:
    for body in (
        {"no_such_fault": 1},
        {"hang_s": -1},
        {"refuse": "sometimes"},
        {"times": 0, "hang_s": 1},
    ):
        response = await http.post("/emulator/faults", json=body)
        assert response.status_code == 400
        assert "error" in response.json()
    assert (await http.get("/emulator/faults")).json()["armed"] == {}
    assert (await http.get("/api/emulator/faults")).status_code == 404  # not a ComfyUI route
