"""Smoke test of bench.quickstart: case 2 through a real gateway, one policy, a fast clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench import quickstart


def test_mixed_case_finishes_every_job_and_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "quickstart.md"
    argv = ["--cases", "mixed", "--policies", "affinity", "--time-scale", "0.05"]
    assert quickstart.main([*argv, "--out", str(out)]) == 0
    text = out.read_text()
    assert "| finished | 4/4 |" in text
    assert "| makespan s |" in text


def test_each_recorded_job_says_why_the_policy_sent_it_where_it_ran() -> None:
    case = next(c for c in quickstart.CASES if c.name == "mixed")
    run = asyncio.run(quickstart.run_case(case, "affinity", seed=0, scale=0.05))
    assert run.jobs and run.error is None
    for job in run.jobs:
        assert job.why is not None, job
        assert job.why["reason"] in ("warm", "load")
        assert job.why["expected_done_s"] > 0
