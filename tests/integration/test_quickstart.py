"""Smoke test of bench.quickstart: case 2 through a real gateway, one policy, a fast clock."""

from __future__ import annotations

from pathlib import Path

from bench import quickstart


def test_mixed_case_finishes_every_job_and_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "quickstart.md"
    argv = ["--cases", "mixed", "--policies", "affinity", "--time-scale", "0.05"]
    assert quickstart.main([*argv, "--out", str(out)]) == 0
    text = out.read_text()
    assert "| finished | 4/4 |" in text
    assert "| makespan s |" in text
