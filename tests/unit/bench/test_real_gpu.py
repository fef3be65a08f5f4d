"""The real-GPU bench's pure parts: the A/B farm file, the trace's lower bound from the raw
runs, the `--cache-lru` check's table, the simulated interactive cases."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import cache_lru
from bench.real_gpu import AB_GROUPS, X, farm_file
from bench.real_gpu_report import bound_lines, load, simulated_interactive, trace_bound
from gateway.settings import Settings

RAW = Path(__file__).parents[3] / "bench" / "data" / "real_gpu"


def ab_args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = dict(
        gpus=[0], per_gpu=2, emulate=None, ab_flag="--use-split-cross-attention", ab_ckpt=X
    )
    values.update(overrides)
    return argparse.Namespace(**values)


def test_the_ab_farm_puts_one_worker_per_card_in_the_baseline(tmp_path: Path) -> None:
    config = tmp_path / "farm.toml"
    config.write_text(farm_file(ab_args(gpus=[0, 1]), "affinity", True, ab=True))
    settings = Settings(config=str(config))
    groups = {w.name: (w.group, w.args, w.gpu) for w in settings.workers}
    assert groups == {
        "g0w0": ("base", (), 0),
        "g0w1": ("variant", ("--use-split-cross-attention",), 0),
        "g1w0": ("base", (), 1),
        "g1w1": ("variant", ("--use-split-cross-attention",), 1),
    }
    (experiment,) = settings.experiments
    assert experiment.groups == AB_GROUPS
    assert settings.preload == (X,)


def test_the_policy_farm_has_no_groups_and_no_experiment(tmp_path: Path) -> None:
    config = tmp_path / "farm.toml"
    config.write_text(farm_file(ab_args(), "round_robin", True))
    settings = Settings(config=str(config))
    assert {w.group for w in settings.workers} == {"default"}
    assert all(w.args == () for w in settings.workers)
    assert settings.experiments == ()


def test_the_trace_bound_from_the_raw_h200_runs() -> None:
    runs = load([RAW / "h200-run2.json", RAW / "h200-run3.json"])
    bound = trace_bound(runs)
    assert bound is not None
    # two instances share the card: no more jobs per second than one alone
    assert bound["card_s"] == min(bound["alone_s"], bound["shared_s"] / 2)
    assert bound["loads"] == 2  # B and C; A is preloaded
    assert bound["hidden_s"] < bound["serial_s"] < bound["serial_cold_s"]
    assert any("**Not reachable**" in line for line in bound_lines(runs))


def test_the_cache_table_marks_a_disagreement() -> None:
    measured = json.loads((RAW / "h200-cache-lru.json").read_text())
    assert "**no**" not in cache_lru.table(measured)
    flipped = [dict(row) for row in measured["modes"]["8"]]
    flipped[3]["reloaded"] = not flipped[3]["reloaded"]
    measured["modes"]["8"] = flipped
    assert "**no**" in cache_lru.table(measured)


def test_in_the_simulator_the_burst_after_the_sequential_case_needs_no_load() -> None:
    """The real card's interactive cases, chained as the bench runs them, on two instances
    sharing one H200: the sequential case leaves A, X and Y on one worker and A and B on the
    other, and the burst of A, X, B, Y runs warm, as fast as round_robin's (whose cursor lines
    up with the sequential case's). Before the warm tie of guarantee 4 the burst's A went to
    the worker holding X and Y and the burst took 7.2 s against 4.7."""
    args = ("--cache-lru", "22")
    _, ours = simulated_interactive("affinity", "h200-pair", args)
    _, robin = simulated_interactive("round_robin", "h200-pair", args)
    assert ours <= robin * 1.05
