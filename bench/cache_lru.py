"""Which checkpoints real ComfyUI keeps under each cache mode, beside the emulator's prediction.

ComfyUI's `--cache-lru N` keeps N node results, not N checkpoints; a checkpoint stays loaded
only while its loader's result is cached (`workers/emulator/card/residency.py`). This starts one
ComfyUI per cache mode, all on one GPU at once, sends each the same one-after-another
sequence of txt2img prompts (fresh seeds) over three SD1.5 checkpoints, and records per job
whether the loader ran (the client heard it execute: a reload) and the latency. Beside each
row: what the emulator's `Residency` predicts for the same sequence, and whether they agree.

    python -m bench.cache_lru --comfyui DIR [--gpu 0] [--modes classic,8,10,22] [--json OUT]

The checkpoints must be in `DIR/models/checkpoints` (`bench.real_gpu` makes them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.real_gpu import A, B, C, Recorder
from workers.comfy.flags import LaunchFlags
from workers.emulator.card.profiles import load_profile
from workers.emulator.card.residency import Residency
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

LETTERS = {"A": A, "B": B, "C": C}
SEQUENCE = "ABCABC" + "ABAB" + "AAAAB"
"""Three checkpoints in turn, two in turn, then a run of one: each mode keeps a different set."""
STEPS = 8
READY_TIMEOUT_S = 180.0
JOB_TIMEOUT_S = 60.0


def mode_args(mode: str) -> list[str]:
    """`classic` or an LRU size."""
    return [] if mode == "classic" else ["--cache-lru", mode]


def predicted_reloads(mode: str, sequence: str = SEQUENCE) -> list[bool]:
    """The emulator's prediction: whether each prompt's loader runs."""
    residency = Residency(load_profile("h200"), LaunchFlags.parse(mode_args(mode)))
    return [residency.touch(LETTERS[c], "sd15") is not None for c in sequence]


def start_comfyui(comfyui: Path, gpu: int, mode: str, root: Path) -> tuple[ChildProcess, str]:
    port = free_port()
    web, out = root / "web", root / f"out-{mode}"
    web.mkdir(exist_ok=True)
    argv = [sys.executable, "main.py", "--listen", "127.0.0.1", "--port", str(port),
            "--front-end-root", str(web), "--disable-auto-launch", "--output-directory",
            str(out), "--temp-directory", str(root / f"tmp-{mode}"), *mode_args(mode)]  # fmt: skip
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu),
           "PYTHONPATH": f"{path}:{comfyui}" if path else str(comfyui)}  # fmt: skip
    child = ChildProcess(argv, env=env, cwd=comfyui, log_path=root / f"comfyui-{mode}.log")
    child.start()
    return child, f"http://127.0.0.1:{port}"


async def replay(url: str, seed: int) -> list[dict[str, Any]]:
    """The sequence one prompt after another; per job: checkpoint, loader ran, latency."""
    client = Recorder(url)
    await client.open()
    rows = []
    try:
        for i, letter in enumerate(SEQUENCE):
            job = await client.send(LETTERS[letter], seed + i, steps=STEPS)
            await client.wait(job, time.monotonic() + JOB_TIMEOUT_S)
            latency = None if job.latency_s is None else round(job.latency_s, 3)
            rows.append({"ckpt": letter, "reloaded": job.loaded, "latency_s": latency})
    finally:
        await client.close()
    return rows


async def measure(comfyui: Path, gpu: int, modes: Sequence[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        started = {m: start_comfyui(comfyui, gpu, m, Path(tmp)) for m in modes}
        try:
            for child, url in started.values():
                await asyncio.to_thread(child.wait_ready, f"{url}/prompt", READY_TIMEOUT_S)
            seed = int(time.time()) % 10**6 * 100
            runs = await asyncio.gather(*(replay(url, seed) for _, url in started.values()))
        finally:
            for child, _ in started.values():
                child.terminate(grace_s=10)
    return {"sequence": SEQUENCE, "steps": STEPS, "modes": dict(zip(modes, runs, strict=True))}


def table(result: dict[str, Any]) -> str:
    """One row per mode: the reloads heard (R) and predicted, and where they differ."""
    lines = [
        f"sequence {result['sequence']} (R: the loader ran)",
        "| mode | real | emulator | agree | reloads real / predicted | mean latency s after the "
        "first three |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, rows in result["modes"].items():
        real = [bool(r["reloaded"]) for r in rows]
        predicted = predicted_reloads(mode, result["sequence"])
        marks = "".join("R" if r else "." for r in real)
        guess = "".join("R" if p else "." for p in predicted)
        latencies = [r["latency_s"] for r in rows[3:] if r["latency_s"] is not None]
        mean = sum(latencies) / len(latencies) if latencies else float("nan")
        name = "classic" if mode == "classic" else f"--cache-lru {mode}"
        lines.append(
            f"| {name} | `{marks}` | `{guess}` | {'yes' if real == predicted else '**no**'} "
            f"| {sum(real)} / {sum(predicted)} | {mean:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cache_lru")
    parser.add_argument("--comfyui", type=Path, required=True)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--modes", default="classic,8,10,22")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.comfyui.resolve(), args.gpu, args.modes.split(",")))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
