"""The layout probe's client against the emulator (the real run needs ComfyUI on a GPU)."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.real_gpu import A, B, X
from bench.real_gpu_layout import Rounds, run, table
from tests.unit.workers.emulator.running import running_emulator


def test_a_prompt_is_timed_by_the_workers_own_clock(tmp_path: Path) -> None:
    with running_emulator(tmp_path, time_scale=0.05) as emulator:
        port = urlsplit(emulator.url).port
        assert port is not None
        began = time.monotonic()
        first = run(port, A, seed=1)
        wall_s = time.monotonic() - began
        second = run(port, A, seed=2)
    # A 20-step 512x512 SD1.5 job on an emulated H200 takes about a second, here x 0.05; the
    # client polls history every 0.2 s, so the worker's own span is well inside the wall time.
    assert 0.0 < first < wall_s - 0.1
    assert 0.0 < second < 1.0


def test_the_table_has_a_row_per_case() -> None:
    text = table({"warm X": [1.0, 2.0, 4.0], "after A": [3.0]})
    assert "| warm X | 3 | 2.33 | 2.00 | 1.00-4.00 |" in text
    assert "| after A | 1 | 3.00 | 3.00 | 3.00-3.00 |" in text


def test_the_switch_case_times_each_family_after_each_family_in_every_block(
    tmp_path: Path,
) -> None:
    with running_emulator(tmp_path, time_scale=0.02, more_checkpoints=(X,)) as emulator:
        port = urlsplit(emulator.url).port
        assert port is not None
        rounds = Rounds()
        rounds.switches(port, blocks=2)
    assert sorted(rounds.rows) == sorted(
        [
            "A after X on 1 (a switch)",
            "A after A on 1",
            "X after A on 1 (a switch)",
            "X after X on 1",
        ]
    )
    assert all(len(times) == 2 and min(times) > 0.0 for times in rounds.rows.values())


def test_the_beside_case_times_a_load_and_a_warm_job_alone_and_beside_the_other(
    tmp_path: Path,
) -> None:
    """On two emulated instances (classic cache): A after B loads, A after A is warm, and each
    is timed alone and while the other instance runs an X job."""
    (tmp_path / "0").mkdir()
    (tmp_path / "1").mkdir()
    with (
        running_emulator(tmp_path / "0", time_scale=0.05, more_checkpoints=(B,)) as first,
        running_emulator(tmp_path / "1", time_scale=0.05, more_checkpoints=(X,)) as second,
    ):
        ports = [urlsplit(emulator.url).port for emulator in (first, second)]
        assert ports[0] is not None and ports[1] is not None
        rounds = Rounds()
        rounds.beside(ports[0], ports[1], blocks=2)
    rows = rounds.rows
    assert sorted(rows) == sorted(
        [
            "A load on 0 alone",
            "A warm on 0 alone",
            "A load on 0 beside X on 1",
            "A warm on 0 beside X on 1",
        ]
    )
    assert all(len(times) == 2 and min(times) > 0.0 for times in rows.values())
    assert min(rows["A load on 0 alone"]) > max(rows["A warm on 0 alone"])
