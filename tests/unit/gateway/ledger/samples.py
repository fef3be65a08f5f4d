"""Job ledgers drawn from the emulator's cost model with noise: an A/B experiment's data
without a farm, fast enough for many repeated runs."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import CostModel, JobShape, job_phases
from workers.emulator.card.profiles import load_profile

SDXL = JobShape("sdxl_b.safetensors", "sdxl", steps=20, width=1024, height=1024)
JOB_NOISE = 0.05
"""Log-sd of what slows a whole job (the machine, the event loop)."""
PHASE_NOISE = 0.08
"""Log-sd of each phase on its own."""


def model(args: Sequence[str], profile: str = "rtx4070ti") -> CostModel:
    return CostModel(load_profile(profile), LaunchFlags.parse(list(args)))


def warm_ledger(
    costs: CostModel, group: str, rng: random.Random, index: int, experiment: str = "ab"
) -> dict[str, Any]:
    """One warm job of `group` (a new seed: its text encodings cached), with noise."""
    times = job_phases(costs, SDXL, load_tier=None, first_job=False, encode_cached=True)
    job = rng.lognormvariate(0.0, JOB_NOISE)
    save = costs.save_s(SDXL.megapixels, 1)
    phases = {
        "load": 0.0,
        "encode": 0.0,
        "sample": times.sample_s,
        "decode": times.decode_s,
        "save": save,
        "other": times.other_s - save,
    }
    phases = {p: s * job * rng.lognormvariate(0.0, PHASE_NOISE) for p, s in phases.items()}
    exec_s = sum(phases.values())
    return {
        "worker": f"{group}-w",
        "group": group,
        "experiment": experiment,
        "shape": "s",
        "family": "sdxl",
        "state": "success",
        "timed": True,
        "cold": False,
        "process_job": index + 2,
        "finished_at_ms": index,
        "exec_s": exec_s,
        "total_s": exec_s,
        "phases": phases,
    }


def stream(
    arms: dict[str, CostModel], seed: int, experiment: str = "ab"
) -> Iterator[dict[str, Any]]:
    """Endless ledgers, the groups in random order (as jobs finish on a farm)."""
    rng = random.Random(seed)
    names = list(arms)
    index = 0
    while True:
        group = rng.choice(names)
        yield warm_ledger(arms[group], group, rng, index, experiment)
        index += 1
