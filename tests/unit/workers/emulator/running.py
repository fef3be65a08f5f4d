"""An emulator started as a real process (`python -m workers.emulator`) on a free port."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from workers.supervision.launch import FarmLayout, WorkerSpec, emulator_argv
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

READY_TIMEOUT_S = 30.0
RECORDED = Path(__file__).resolve().parents[4] / "tests" / "contract" / "ws_transcript.json"
TRANSCRIPT_CHECKPOINTS = "A.safetensors,B.safetensors,C.safetensors,rand_sd15.safetensors"


@dataclass(frozen=True)
class Running:
    """A started emulator: its URLs, directories and process."""

    url: str
    output_dir: Path
    input_dir: Path
    log_path: Path
    child: ChildProcess

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/ws"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextmanager
def running_emulator(
    work_dir: Path, *extra: str, time_scale: float = 0.01, more_checkpoints: tuple[str, ...] = ()
) -> Iterator[Running]:
    """Start the emulator (the transcript's checkpoints and `more_checkpoints`, tiny start-up),
    stop it on exit."""
    port = free_port()
    layout = FarmLayout(work_dir, work_dir / "input", time_scale)
    checkpoints = (*TRANSCRIPT_CHECKPOINTS.split(","), *more_checkpoints)
    args = ("--startup-s", "0", *extra)
    spec = WorkerSpec("emulator", emulate="h200", checkpoints=checkpoints, args=args)
    output_dir, input_dir = layout.output_dir(spec.name), layout.input_dir
    argv = emulator_argv(spec, port, layout)
    child = ChildProcess(argv, log_path=work_dir / "emulator.log")
    url = f"http://127.0.0.1:{port}"
    child.start()
    try:
        child.wait_ready(f"{url}/prompt", READY_TIMEOUT_S)
        yield Running(url, output_dir, input_dir, work_dir / "emulator.log", child)
    finally:
        child.terminate()


def transcript() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


def transcript_prompt() -> dict[str, Any]:
    """The txt2img prompt of the recorded transcript (64x64, 1 step, SaveImage "bench")."""
    prompt: dict[str, Any] = transcript()["responses"]["queue_during"]["queue_running"][0][2]
    return prompt


def txt2img(
    *, seed: int = 1, steps: int = 3, ckpt: str = "A.safetensors", prefix: str = "t"
) -> dict[str, Any]:
    prompt: dict[str, Any] = json.loads(json.dumps(transcript_prompt()))
    prompt["3"]["inputs"].update({"seed": seed, "steps": steps})
    prompt["4"]["inputs"]["ckpt_name"] = ckpt
    prompt["9"]["inputs"]["filename_prefix"] = prefix
    return prompt


def post_prompt(client: httpx.Client, prompt: dict[str, Any], **fields: Any) -> Any:
    response = client.post("/prompt", json={"prompt": prompt, **fields})
    assert response.status_code == 200, response.text
    return response.json()


async def until_sampling(http: httpx.AsyncClient, timeout_s: float = 10.0) -> None:
    """Return once the emulator runs a prompt's sampler (node "3" of `txt2img`)."""
    for _ in range(int(timeout_s / 0.01)):
        if (await http.get("/emulator/state")).json()["last_node_id"] == "3":
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the sampler never started")


def kinds(frames: Sequence[dict[str, Any]]) -> list[str]:
    return [frame["type"] for frame in frames]
