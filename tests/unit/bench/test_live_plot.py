"""The live plot reads `bench.live`'s own tables and judges ours against the best baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import live_plot
from bench.live import Measured, parse_case, table


def measured(mean_s: float, goodput: float, finished: int = 10, loads: float = 5.0) -> Measured:
    return Measured(
        jobs=10,
        finished=finished,
        mean_s=mean_s,
        p50_s=mean_s,
        p95_s=2 * mean_s,
        loads_per_100=loads,
        goodput_per_s=goodput,
        makespan_s=10 * mean_s,
    )


def report() -> str:
    """A report as `bench.live` writes it: ours, two baselines, one that left jobs unfinished."""
    metrics = parse_case("poisson80").metrics
    rows = [
        ("affinity", measured(4.0, 1.2), measured(5.0, 1.0)),
        ("swarm_like", measured(5.0, 1.0), measured(4.0, 1.1)),
        ("ect_greedy", measured(6.0, 1.5), measured(6.0, 0.9, loads=0.0)),
        ("round_robin", measured(1.0, 9.0, finished=7), measured(1.0, 9.0)),
    ]
    return f"# Live\n\n## poisson80\n\n{table(rows, metrics)}\n\nSome notes | with a bar.\n"


def test_a_report_reads_back_as_the_numbers_it_was_written_from() -> None:
    cases = live_plot.parse(report())
    assert list(cases) == ["poisson80"]
    ours, swarm, ect, rr = cases["poisson80"]
    assert (ours.policy, ours.finished, rr.finished) == ("affinity", True, False)
    assert ours.values["p95 s"] == (8.0, 10.0)
    assert swarm.values["goodput/s"] == (1.0, 1.1)
    assert ect.values["loads/100"] == (5.0, 0.0)


def test_ours_is_judged_against_each_sides_best_baseline_that_finished_every_job() -> None:
    cells = {c.measure: c for c in live_plot.judge(live_plot.parse(report()))}
    assert "loads/100" not in cells
    p95 = cells["p95 s"]
    # lower is better: best baseline / ours; live best swarm_like 10 vs 8, sim swarm_like 8 vs 10
    assert p95.live == pytest.approx(1.25)
    assert p95.sim == pytest.approx(0.8)
    assert p95.baseline == "swarm_like"
    goodput = cells["goodput/s"]
    # higher is better: ours / best; round_robin's 9.0 left out (3 jobs unfinished)
    assert goodput.live == pytest.approx(1.2 / 1.5)
    assert goodput.sim == pytest.approx(1.0 / 1.1)
    assert goodput.baseline == "ect_greedy / swarm_like"


def test_a_case_without_ours_or_without_a_comparable_baseline_is_not_plotted() -> None:
    text = report().replace("| affinity |", "| sticky |")
    assert live_plot.judge(live_plot.parse(text)) == []


def test_a_row_that_does_not_fit_its_head_is_refused() -> None:
    broken = report().replace("| swarm_like | 10/10 / 10/10 |", "| swarm_like |")
    with pytest.raises(ValueError, match="cells under a head"):
        live_plot.parse(broken)


def test_the_command_line_plots_every_report_given(tmp_path: Path) -> None:
    first, second, out = tmp_path / "a.md", tmp_path / "b.md", tmp_path / "live.png"
    first.write_text(report())
    second.write_text(report())
    assert live_plot.main([str(first), str(second), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    empty = tmp_path / "empty.md"
    empty.write_text("# nothing\n")
    assert live_plot.main([str(empty), "--out", str(tmp_path / "none.png")]) == 1
    assert not (tmp_path / "none.png").exists()
