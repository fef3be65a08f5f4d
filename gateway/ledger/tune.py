"""`comfy-gateway tune --worker NAME --workflow FILE [--flags ...]`: which launch flags make
this workflow faster on this worker, measured one flag at a time against the baseline.

The worker is drained (what it runs finishes, what waits on it goes elsewhere), then
relaunched for each arm in turn: its own launch args (the baseline), then the baseline with
one candidate flag (replacing any flag ComfyUI refuses beside it: `--fp16-vae` replaces
`--fp32-vae`). Meanwhile it sits alone in a group of its own (`tune.NAME`), so the other
workers keep serving the farm's traffic and only the tuner's jobs, pinned to that group,
reach it. Each arm runs the workflow `--cold` times right after a relaunch and `--warm`
times after that, each with new seeds; the jobs' phase ledgers are compared with the
baseline's (`gateway.ledger.abreport.compare`: ratio per phase, bootstrap intervals, the
always-valid test), the first warm image of each arm with the baseline's (the quality
guard). At the end the worker is relaunched with its own args and group and resumed, also
when the tuning fails half way.

The candidates default to ComfyUI's performance flags that the gateway knows (ComfyUI
0.3.64's parser, `workers.comfy.parser`): attention backends, VAE precision, VRAM modes,
cache modes.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gateway.ledger import quality
from gateway.ledger.abreport import TOTAL, compare
from gateway.ledger.plot import NoPlotting, effect_bars
from gateway.ledger.record import PHASES
from gateway.ledger.remote import DEFAULT_URL, Gateway, RemoteError
from workers.comfy.parser import comfyui_refuses, exclusive_with

CANDIDATES = (
    "--use-split-cross-attention",
    "--use-quad-cross-attention",
    "--use-sage-attention",
    "--use-flash-attention",
    "--fp16-vae",
    "--bf16-vae",
    "--fp32-vae",
    "--lowvram",
    "--highvram",
    "--novram",
    "--cache-lru 4",
    "--cache-none",
)
SEED_INPUTS = ("seed", "noise_seed")
READY_TIMEOUT_S = 600.0
BASELINE = "baseline"


@dataclass
class Arm:
    """One launch configuration under test and what its jobs measured."""

    label: str
    args: tuple[str, ...]
    ledgers: list[dict[str, Any]] = field(default_factory=list)
    images: list[bytes] = field(default_factory=list)


def with_flag(baseline: Sequence[str], candidate: str) -> tuple[str, ...]:
    """The baseline's args with `candidate` (a flag and its value, if any) in place of any
    flag ComfyUI refuses beside it."""
    added = shlex.split(candidate)
    refused = set(exclusive_with(added[0]))
    kept: list[str] = []
    skip_value = False
    for token in baseline:
        if skip_value and not token.startswith("--"):
            skip_value = False
            continue
        skip_value = token.split("=", 1)[0] in refused
        if not skip_value:
            kept.append(token)
    return (*kept, *added)


def candidates(baseline: Sequence[str], asked: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(label, args) of each candidate that changes the baseline and that ComfyUI accepts."""
    out = []
    for candidate in asked or CANDIDATES:
        args = with_flag(baseline, candidate)
        if set(args) == set(baseline) and len(args) == len(baseline):
            continue  # already the baseline
        if comfyui_refuses(args) is None:
            out.append((candidate, args))
    return out


def reseeded(prompt: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The workflow with new seeds (a new picture, the same work)."""
    out: dict[str, Any] = json.loads(json.dumps(prompt))
    for body in out.values():
        inputs = body.get("inputs") if isinstance(body, dict) else None
        for key in SEED_INPUTS:
            if isinstance(inputs, dict) and isinstance(inputs.get(key), int):
                inputs[key] = rng.randrange(2**31)
    return out


class Tuner:
    """Drives one worker through the arms over the gateway's HTTP API."""

    def __init__(
        self,
        gateway: Gateway,
        worker: str,
        prompt: Mapping[str, Any],
        *,
        warm: int,
        cold: int,
        seed: int = 0,
        progress: Callable[[str], None] = lambda _: None,
    ):
        self.gateway = gateway
        self.worker = worker
        self.prompt = prompt
        self.warm = warm
        self.cold = cold
        self.rng = random.Random(seed)
        self.progress = progress
        self.group = f"tune.{worker}"

    def run(self, asked: Sequence[str]) -> list[Arm]:
        """Measure the baseline and each of the `asked` candidates (default: `CANDIDATES`);
        the worker is restored whatever happens."""
        self._call("drain")
        self._until_idle()
        original = self._relaunch(None, self.group)["previous"]
        arms = [Arm(BASELINE, tuple(original["args"]))]
        arms += [Arm(label, args) for label, args in candidates(original["args"], asked)]
        try:
            with tqdm(total=len(arms) * (self.cold + self.warm), unit="job", desc="tune") as bar:
                for index, arm in enumerate(arms):
                    bar.set_postfix_str(arm.label)
                    self._measure(arm, relaunched=index == 0, bar=bar)
        finally:
            self._call("drain")
            self._until_idle()
            self._relaunch(original["args"], original["group"])
            self._until_ready()
            self._call("resume")
        return arms

    def _measure(self, arm: Arm, *, relaunched: bool, bar: tqdm[Any]) -> None:
        for round_index in range(max(self.cold, 1)):
            if not (relaunched and round_index == 0):
                self._relaunch(list(arm.args), self.group)
            self._until_ready()
            self._call("resume")
            if self.cold:
                arm.ledgers.append(self._job(arm)[0])
                bar.update()
        for index in range(self.warm):
            ledger, entry = self._job(arm)
            arm.ledgers.append(ledger)
            if index == 0:
                arm.images = self.gateway.images(entry)
            bar.update()

    def _job(self, arm: Arm) -> tuple[dict[str, Any], dict[str, Any]]:
        job_id, entry = self.gateway.run(reseeded(self.prompt, self.rng), self.group)
        record = self.gateway.call("GET", f"/gateway/jobs/{job_id}")
        ledger = dict(record.get("ledger") or {})
        if entry.get("status", {}).get("status_str") != "success" or not ledger:
            raise RemoteError(f"{arm.label}: job {job_id} did not succeed")
        ledger["group"] = arm.label
        return ledger, entry

    def _worker(self) -> dict[str, Any]:
        record: dict[str, Any] = self.gateway.call("GET", f"/gateway/workers/{self.worker}")
        return record

    def _call(self, verb: str) -> None:
        self.gateway.call("POST", f"/gateway/workers/{self.worker}/{verb}")

    def _relaunch(self, args: Sequence[str] | None, group: str) -> dict[str, Any]:
        body: dict[str, Any] = {"group": group}
        if args is not None:
            body["args"] = list(args)
        self.progress(f"relaunching {self.worker} with {' '.join(args or ()) or 'its args'}")
        answer: dict[str, Any] = self.gateway.call(
            "POST", f"/gateway/workers/{self.worker}/relaunch", json=body
        )
        return answer

    def _until_idle(self) -> None:
        self._until(lambda w: not w.get("held"), "finished what it runs")

    def _until_ready(self) -> None:
        self._until(lambda w: w.get("phase") == "ready", "ready")

    def _until(self, done: Callable[[dict[str, Any]], bool], what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not done(record := self._worker()):
            if time.monotonic() > deadline or record.get("phase") == "failed":
                raise RemoteError(f"worker {self.worker} never {what}: {record.get('state')}")
            time.sleep(0.1)


def effects(arms: Sequence[Arm]) -> list[dict[str, Any]]:
    """Each candidate against the baseline: per measure its warm ratio with intervals, its
    cold ratio, and whether its images stayed sound."""
    baseline = arms[0]
    out = []
    for arm in arms[1:]:
        jobs = [*baseline.ledgers, *arm.ledgers]
        comparison = compare(jobs, BASELINE, arm.label, descriptive=True)
        cold = _cold_ratio(baseline, arm)
        judged = quality.judge(baseline.images, arm.images)
        out.append(
            {
                "flag": arm.label,
                "args": list(arm.args),
                "measures": comparison["measures"],
                "verdict": comparison["verdict"],
                "cold_ratio": cold,
                "quality": {"sound": judged["sound"], "reason": judged["reason"]},
            }
        )
    return out


def _cold_ratio(baseline: Arm, arm: Arm) -> float | None:
    def median_cold(a: Arm) -> float | None:
        values = sorted(x["exec_s"] for x in a.ledgers if x.get("cold") and x.get("exec_s"))
        return values[len(values) // 2] if values else None

    base, mine = median_cold(baseline), median_cold(arm)
    return None if not base or mine is None else round(mine / base, 3)


def recommended(baseline: Sequence[str], found: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The baseline plus, per group of flags ComfyUI refuses together, the one that made the
    warm run decidedly faster by the most, of those whose images stayed sound."""
    best: dict[str, tuple[float, str]] = {}
    for effect in found:
        total = effect["measures"].get(TOTAL)
        if (
            not total
            or not total["decided"]
            or total["ratio"] >= 1
            or not effect["quality"]["sound"]
        ):
            continue
        flag = effect["flag"]
        group = exclusive_with(shlex.split(flag)[0])[0]
        if group not in best or total["ratio"] < best[group][0]:
            best[group] = (total["ratio"], flag)
    args = tuple(baseline)
    for _, flag in best.values():
        args = with_flag(args, flag)
    return args


def table(arms: Sequence[Arm], found: Sequence[Mapping[str, Any]]) -> str:
    """Each flag's effect per phase (warm median ratio and the bootstrap interval of the
    median ratio), its cold ratio and the images."""
    measures = [TOTAL, *PHASES]
    head = ["flag", *("execution" if m == TOTAL else m for m in measures), "cold", "images"]
    rows = [head]
    for effect in found:
        cells = [effect["flag"]]
        for name in measures:
            m = effect["measures"].get(name)
            cells.append("-" if m is None else _effect_cell(m))
        cold = effect["cold_ratio"]
        cells.append("-" if cold is None else f"{cold:.2f}x")
        q = effect["quality"]
        cells.append("sound" if q["sound"] else f"BROKEN: {q['reason']}")
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    jobs = ", ".join(f"{a.label} {len(a.ledgers)}" for a in arms)
    legend = (
        "time with the flag / baseline, warm jobs: median ratio [bootstrap 95 %]; * the "
        f"always-valid test decided. Jobs: {jobs}."
    )
    return "\n".join([*lines, "", legend])


def _effect_cell(m: Mapping[str, Any]) -> str:
    low, high = m.get("bootstrap_median_ratio") or (None, None)
    median_a, median_b = m["median_s"]
    ratio = median_b / median_a if median_a else float("nan")
    interval = "" if low is None else f" [{low:.2f}-{high:.2f}]"
    return f"{ratio:.2f}x{interval}{'*' if m['decided'] else ''}"


OWN_OPTIONS = frozenset(
    {"--worker", "--workflow", "--warm", "--cold", "--url", "--token", "--plot", "--json"}
)


def split_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the tuner's own options, the candidates after `--flags`, up to the next option of
    the tuner's own): each candidate is a flag and the values that follow it."""
    own: list[str] = []
    asked: list[str] = []
    listing = False
    for token in argv:
        if token == "--flags" or token in OWN_OPTIONS:
            listing = token == "--flags"
            own.append(token)
        elif not listing:
            own.append(token)
        elif token.startswith("--") or not asked:
            asked.append(token)
        else:
            asked[-1] += f" {token}"
    return own, asked


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="comfy-gateway tune", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--worker", required=True)
    parser.add_argument("--workflow", required=True, type=Path, help="an API-format workflow")
    parser.add_argument(
        "--flags",
        action="store_true",
        help="last: the candidates that follow it, each a flag with its value if it has one "
        "(--flags --fp16-vae --cache-lru 4); default: " + " ".join(CANDIDATES),
    )
    parser.add_argument("--warm", type=int, default=12, help="warm runs per flag (12)")
    parser.add_argument("--cold", type=int, default=1, help="runs right after a relaunch (1)")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--token", default=None)
    parser.add_argument("--plot", type=Path, default=None, help="PNG (default tune-WORKER.png)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    own, asked = split_flags(argv)
    args = parser.parse_args(own)
    try:
        prompt = json.loads(args.workflow.read_text())
    except (OSError, ValueError) as exc:
        print(f"comfy-gateway tune: cannot read {args.workflow}: {exc}", file=sys.stderr)
        return 2
    prompt = prompt.get("prompt", prompt) if isinstance(prompt, dict) else prompt
    try:
        with Gateway(args.url, args.token, timeout_s=60) as gateway:
            tuner = Tuner(
                gateway,
                args.worker,
                prompt,
                warm=args.warm,
                cold=args.cold,
                progress=tqdm.write,
            )
            arms = tuner.run(asked)
    except RemoteError as exc:
        print(f"comfy-gateway tune: {exc}", file=sys.stderr)
        return 1
    found = effects(arms)
    best = recommended(arms[0].args, found)
    print(table(arms, found))
    print(f"\nrecommended launch args for {args.worker}: {shlex.join(best) or '(none)'}")
    if args.json:
        body = {
            "worker": args.worker,
            "baseline": list(arms[0].args),
            "effects": found,
            "recommended": list(best),
        }
        args.json.write_text(json.dumps(body, indent=1, default=str))
    _plot(args.worker, found, args.plot or Path(f"tune-{args.worker}.png"))
    return 0


def _plot(worker: str, found: Sequence[Mapping[str, Any]], out: Path) -> None:
    rows = []
    for effect in found:
        total = effect["measures"].get(TOTAL)
        interval = total and total.get("bootstrap_median_ratio")
        if total and interval:
            median_a, median_b = total["median_s"]
            rows.append((effect["flag"], median_b / median_a, interval[0], interval[1]))
    if not rows:
        return
    try:
        effect_bars(f"{worker}: warm execution time per flag", rows, out)
    except NoPlotting as exc:
        print(f"no plot: {exc}", file=sys.stderr)
        return
    print(f"plot: {out}")
