"""Two ComfyUI instances on one GPU, no gateway: does what the other instance holds, or what
this one ran last, change how fast a warm SDXL job runs on the worker itself?

`python -m bench.real_gpu_layout --comfyui DIR [--make-ckpt SCRIPT] [--rounds 2] [--json OUT]`

The question comes from the one-card runs (`bench/results/real_gpu.md`): with the same
placements, warm SDXL jobs ran slower under one policy than under another. Each round starts
two fresh instances on GPU 0 as the gateway launches them (`--cache-lru 22` on an H200) and
times warm `X` (SDXL) jobs on the second by the worker's own clock (history's
`execution_start` to `execution_success`), each with a fresh seed:

- round_robin's layout (instance 0 holds A and B, instance 1 X and Y), then ours' (Y on
  instance 0 too), each as the sequential case runs them (A on 0, then X on 1);
- X after X on one instance, X after A on the same instance (a family switch), X while the
  instance is asked for `/system_stats` every 0.1 s, and X after X again (drift).

`--cases switch` asks only whether a family switch on one instance costs time, for both
families, with the cases interleaved so that the card's streaks of fast and slow jobs fall on
all of them alike: blocks of X, A, A, X, X on one instance, timing A after X, A after A, X
after A and X after X (`--blocks` of them, 8 by default).

`--cases beside` asks how much longer a checkpoint load takes while the card's other instance
samples (the one-card runs saw 4.2-4.3 s for loads of 0.7-2.3 s alone). Instance 0 runs
ComfyUI's classic cache, so A after B is a load (from the page cache: B is a link to A's
file) and A after A is warm; each block times, on instance 0, A loading alone, A warm alone,
A loading while instance 1 runs an X job posted just before, and A warm likewise; the load's
extra beside the other instance is the first difference less the second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from bench.real_gpu import A, B, X, Y, comfy_env, make_checkpoints, txt2img
from workers.supervision.launch import FarmLayout, WorkerSpec, comfyui_argv, worker_env
from workers.supervision.ports import free_port
from workers.supervision.process import ChildProcess

READY_TIMEOUT_S = 120.0
JOBS = 6
Step = tuple[int, str, bool]
"""(port, checkpoint, whether its time is recorded)."""


def get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def run(port: int, checkpoint: str, seed: int) -> float:
    """Seconds the worker took for one prompt, by its own clock."""
    body = json.dumps({"prompt": txt2img(checkpoint, seed), "client_id": "layout"}).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/prompt", body, headers)
    with urllib.request.urlopen(request, timeout=30) as reply:
        prompt_id = json.loads(reply.read())["prompt_id"]
    while True:
        time.sleep(0.2)
        entry = get(port, f"/history/{prompt_id}").get(prompt_id)
        if entry and entry.get("status", {}).get("completed") is not None:
            stamps = {name: data["timestamp"] for name, data in entry["status"]["messages"]}
            return float(stamps["execution_success"] - stamps["execution_start"]) / 1000


LRU = ("--cache-lru", "22")


@contextmanager
def instances(
    comfyui: Path, args: Sequence[tuple[str, ...]] = (LRU, LRU)
) -> Iterator[tuple[int, int]]:
    """Two fresh ComfyUI instances on GPU 0, launched as the gateway launches them
    (`workers.supervision.launch.comfyui_argv`) with `args` each; their ports; stopped on
    the way out."""
    with tempfile.TemporaryDirectory() as tmp:
        layout = FarmLayout(Path(tmp), Path(tmp) / "input")
        layout.frontend_dir.mkdir(parents=True)
        processes = []
        try:
            for i in range(2):
                spec = WorkerSpec(f"w{i}", gpu=0, args=args[i], comfyui=comfyui)
                port = free_port()
                env = worker_env(spec, comfy_env(comfyui))
                process = ChildProcess(
                    comfyui_argv(spec, port, layout),
                    env=env,
                    cwd=comfyui,
                    log_path=Path(tmp) / f"{spec.name}.log",
                )
                process.start()
                processes.append((process, port))
            for process, port in processes:
                process.wait_ready(f"http://127.0.0.1:{port}/system_stats", READY_TIMEOUT_S)
            yield processes[0][1], processes[1][1]
        finally:
            for process, _ in processes:
                process.terminate()


class Rounds:
    def __init__(self) -> None:
        self.seed = 1000
        self.rows: dict[str, list[float]] = {}

    def run(self, port: int, checkpoint: str) -> float:
        self.seed += 1
        return run(port, checkpoint, self.seed)

    def measure(self, label: str, steps: Sequence[Step]) -> None:
        kept = []
        for port, checkpoint, keep in steps:
            seconds = self.run(port, checkpoint)
            if keep:
                kept.append(seconds)
        self.rows.setdefault(label, []).extend(kept)
        print(f"{label:46} " + " ".join(f"{s:.2f}" for s in kept), flush=True)

    def one(self, w0: int, w1: int) -> None:
        sequential = [step for _ in range(JOBS) for step in ((w0, A, False), (w1, X, True))]
        for port, checkpoint in ((w0, A), (w0, B), (w1, X), (w1, Y)):
            self.run(port, checkpoint)
        self.measure("round_robin's layout: X on 1 after A on 0", sequential)
        self.run(w0, Y)
        self.measure("ours' layout (Y on 0 too): X on 1 after A on 0", sequential)
        self.measure("X after X on 1", [(w1, X, True)] * JOBS)
        switches = [step for _ in range(JOBS) for step in ((w1, A, False), (w1, X, True))]
        self.measure("X after A on 1 (a family switch)", switches)
        with polled(w1):
            self.measure("X on 1, polled every 0.1 s", [(w1, X, True)] * JOBS)
        self.measure("X after X on 1, again", [(w1, X, True)] * JOBS)

    def switches(self, w1: int, blocks: int) -> None:
        """A family switch on one instance, both ways, the four cases interleaved."""
        self.run(w1, X)
        self.run(w1, A)
        labels = ("A after X on 1 (a switch)", "A after A on 1", "X after A on 1 (a switch)",
                  "X after X on 1")  # fmt: skip
        for _ in range(blocks):
            times = [self.run(w1, checkpoint) for checkpoint in (X, A, A, X, X)][1:]
            for label, seconds in zip(labels, times, strict=True):
                self.rows.setdefault(label, []).append(seconds)
        self.show(labels)

    def beside(self, w0: int, w1: int, blocks: int) -> None:
        """A load on instance 0 alone and while instance 1 samples, and a warm job likewise."""
        labels = ("A load on 0 alone", "A warm on 0 alone", "A load on 0 beside X on 1",
                  "A warm on 0 beside X on 1")  # fmt: skip
        self.run(w1, X)
        for _ in range(blocks):
            times = []
            for after, other in ((B, False), (A, False), (B, True), (A, True)):
                self.run(w0, after)
                times.append(self.beside_x(w0, w1) if other else self.run(w0, A))
            for label, seconds in zip(labels, times, strict=True):
                self.rows.setdefault(label, []).append(seconds)
        self.show(labels)

    def show(self, labels: Sequence[str]) -> None:
        for label in labels:
            print(f"{label:46} " + " ".join(f"{s:.2f}" for s in self.rows[label]), flush=True)

    def beside_x(self, w0: int, w1: int) -> float:
        """A on instance 0 started once an X job posted to instance 1 is sampling."""
        self.seed += 1
        other = threading.Thread(target=run, args=(w1, X, self.seed))
        other.start()
        time.sleep(BESIDE_AFTER_S)
        seconds = self.run(w0, A)
        other.join()
        return seconds


BESIDE_AFTER_S = 0.3
"""How long after posting the other instance's X job the timed one is posted: past its text
encoding, early in its 2-3 s of sampling."""


@contextmanager
def polled(port: int) -> Iterator[None]:
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.1):
            with suppress(OSError):
                get(port, "/system_stats")

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def table(rows: dict[str, list[float]]) -> str:
    lines = ["| case | jobs | mean s | median s | min-max s |", "| --- | --- | --- | --- | --- |"]
    for label, values in rows.items():
        lines.append(
            f"| {label} | {len(values)} | {statistics.mean(values):.2f} | "
            f"{statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comfyui", type=Path, required=True)
    parser.add_argument("--make-ckpt", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", choices=("layout", "switch", "beside"), default="layout")
    parser.add_argument("--blocks", type=int, default=8, help="blocks of the switch case")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    comfyui = args.comfyui.resolve()
    print("checkpoints made:", make_checkpoints(comfyui, args.make_ckpt), flush=True)
    rounds = Rounds()
    launch = ((), LRU) if args.cases == "beside" else (LRU, LRU)
    for _ in range(args.rounds):
        with instances(comfyui, launch) as (w0, w1):
            if args.cases == "switch":
                rounds.switches(w1, args.blocks)
            elif args.cases == "beside":
                rounds.beside(w0, w1, args.blocks)
            else:
                rounds.one(w0, w1)
    if args.json:
        args.json.write_text(json.dumps(rounds.rows, indent=1))
    print(table(rounds.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
