"""The A/B statistics, and the verdict read after every job over many repeated runs."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from gateway.ledger import abstats
from gateway.ledger.abreport import compare
from tests.unit.gateway.ledger.samples import model, stream

RUNS = 300
JOBS = 120


def test_the_rank_test_matches_known_values() -> None:
    # scipy.stats.mannwhitneyu([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) (asymptotic): p = 0.01208
    assert abstats.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(
        0.01208, abs=2e-4
    )
    assert abstats.mann_whitney([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert abstats.mann_whitney([2, 2], [2, 2]) is None


def test_the_bootstrap_interval_covers_the_ratio() -> None:
    rng = random.Random(3)
    a = [rng.lognormvariate(0, 0.1) for _ in range(60)]
    b = [1.5 * rng.lognormvariate(0, 0.1) for _ in range(60)]
    low, high = abstats.bootstrap_ratio(a, b) or (0.0, 0.0)
    assert low < statistics.fmean(b) / statistics.fmean(a) < high
    assert low > 1.3 and high < 1.7
    assert abstats.bootstrap_ratio([1.0], b) is None


def test_the_sequential_test_abstains_before_enough_jobs_and_finds_a_big_difference() -> None:
    rng = random.Random(5)
    a = [rng.lognormvariate(0, 0.1) for _ in range(abstats.MIN_JOBS - 1)]
    b = [2 * x for x in a]
    early = abstats.sequential(a, b)
    assert early is not None and not early.decided and early.p_value == 1.0
    a = [rng.lognormvariate(0, 0.1) for _ in range(30)]
    b = [2 * rng.lognormvariate(0, 0.1) for _ in range(30)]
    late = abstats.sequential(a, b)
    assert late is not None and late.decided
    low, high = late.interval
    assert low < late.ratio < high and low > 1.0 and math.isclose(late.ratio, 2.0, rel_tol=0.1)


def test_how_many_more_jobs_shrinks_as_the_effect_grows() -> None:
    rng = random.Random(8)
    a = [rng.lognormvariate(0, 0.2) for _ in range(10)]
    small = abstats.sequential(a, [1.03 * x for x in a[::-1]])
    large = abstats.sequential(a, [1.15 * x for x in a[::-1]])
    assert small is not None and large is not None
    assert (small.jobs_to_decide() or 0) > (large.jobs_to_decide() or 0) > 0


def test_identical_groups_read_after_every_job_say_cannot_tell_in_95_percent_of_runs() -> None:
    same = model([])
    false_calls = 0
    for seed in range(RUNS):
        jobs = list(itertools.islice(stream({"a": same, "b": same}, seed), JOBS))
        # The verdict rests on running maxima: once called it stays called, so the last read
        # says whether any read after any job called a winner. Checked by reading every
        # prefix on a few runs.
        called = _called(compare(jobs, "a", "b"))
        if seed < 5:
            peeks = [_called(compare(jobs[:n], "a", "b")) for n in range(2, JOBS + 1)]
            assert any(peeks) == called
        false_calls += called
    assert false_calls / RUNS <= 0.05, f"{false_calls} of {RUNS} runs called a winner"


def test_the_vae_precision_difference_is_found_in_decode_after_a_few_dozen_jobs() -> None:
    arms = {"fp32vae": model(["--fp32-vae"]), "fp16vae": model(["--fp16-vae"])}
    needed = []
    for seed in range(30):
        jobs: list[dict[str, object]] = []
        for job in stream(arms, 1000 + seed):
            jobs.append(job)
            result = compare(jobs, "fp32vae", "fp16vae")
            if _called(result) or len(jobs) >= 200:
                break
        assert _called(result), f"seed {seed}: {result['verdict']}"
        assert result["verdict"].startswith("fp16vae is faster than fp32vae")
        assert "in decode" in result["verdict"]
        assert result["measures"]["decode"]["interval"][1] < 1.0
        needed.append(len(jobs))
    assert statistics.median(needed) <= 60, needed


def _called(result: dict[str, object]) -> bool:
    return "is faster" in str(result["verdict"])
