"""speed: per-instance, per-family run times learned online."""

from __future__ import annotations

import random

import pytest

from gateway.learning.speed import (
    Learning,
    SpeedEstimate,
    observe,
    seed,
    seed_from_probes,
    views,
)

FIXED, PER_UNIT = 0.4, 0.08  # the "true" card: 0.4 s + 0.08 s per work unit


def true_s(work: float) -> float:
    return FIXED + PER_UNIT * work


def learn(est: SpeedEstimate, jobs: int, rng: random.Random, scale: float = 1.0) -> SpeedEstimate:
    for _ in range(jobs):
        work = rng.choice([5.0, 10.0, 22.5])
        est = observe(est, work, scale * true_s(work) * rng.uniform(0.95, 1.05))
    return est


def test_a_warm_up_seed_is_usable_at_once() -> None:
    est = seed(5.0, true_s(5.0))
    assert est.predict_s(5.0) == pytest.approx(true_s(5.0))


def test_two_probe_sizes_seed_both_parts_of_the_line() -> None:
    """One probe keeps the assumed split (wrong here: a fifth of 1.2 s fixed, not a third), so a
    job four times its size is mispredicted; two sizes seed the line through them."""
    probes = [(10.0, true_s(10.0)), (2.5, true_s(2.5))]
    two = seed_from_probes(probes)
    assert two is not None
    assert two.fixed_s == pytest.approx(FIXED) and two.per_unit_s == pytest.approx(PER_UNIT)
    assert two.predict_s(40.0) == pytest.approx(true_s(40.0))
    one = seed_from_probes(probes[:1])
    assert one is not None and one.predict_s(10.0) == pytest.approx(true_s(10.0))
    assert one.predict_s(40.0) > 1.1 * true_s(40.0)


@pytest.mark.parametrize(
    ("probes", "fixed_at_least", "fixed_at_most"),
    [
        ([(10.0, 1.0), (2.5, 1.0)], 0.8, 0.95),  # no slope: mostly fixed, the seed's capped
        ([(10.0, 1.0), (2.5, 0.3)], 0.0, 0.1),  # steeper than through the origin: none fixed
    ],
)
def test_noisy_probes_keep_the_split_within_bounds(
    probes: list[tuple[float, float]], fixed_at_least: float, fixed_at_most: float
) -> None:
    estimate = seed_from_probes(probes)
    assert estimate is not None
    assert fixed_at_least <= estimate.fixed_s <= fixed_at_most
    assert estimate.per_unit_s > 0
    assert estimate.predict_s(10.0) == pytest.approx(1.0, rel=0.05)


def test_no_usable_probe_seeds_nothing() -> None:
    assert seed_from_probes([]) is None
    assert seed_from_probes([(0.0, 1.0), (2.0, 0.0)]) is None


def test_mixed_sizes_recover_fixed_and_per_unit_time() -> None:
    est = learn(seed(5.0, true_s(5.0)), 200, random.Random(1))
    assert est.per_unit_s == pytest.approx(PER_UNIT, rel=0.1)
    assert est.fixed_s == pytest.approx(FIXED, abs=0.1)
    assert est.speed == pytest.approx(1 / PER_UNIT, rel=0.1)


def test_a_first_run_outlier_barely_moves_the_estimate() -> None:
    est = learn(seed(5.0, true_s(5.0)), 50, random.Random(2))
    after = observe(est, 10.0, 20 * true_s(10.0))
    assert after.predict_s(10.0) < 1.3 * true_s(10.0)


def test_a_card_that_slows_down_is_followed_after_the_drift_fires() -> None:
    rng = random.Random(3)
    est = learn(seed(5.0, true_s(5.0)), 100, rng)
    est = learn(est, 15, rng, scale=2.0)
    assert est.predict_s(10.0) == pytest.approx(2 * true_s(10.0), rel=0.15)


def test_views_feed_the_worker_view() -> None:
    book = {("w1", "sd15"): seed(5.0, 1.0), ("w2", "sd15"): seed(5.0, 2.0)}
    speed, fixed = views(book, "w1")
    assert set(speed) == {"sd15"} and speed["sd15"] > views(book, "w2")[0]["sd15"]
    assert fixed["sd15"] == pytest.approx(0.2)


def test_a_shift_is_counted_only_when_the_pace_really_changes() -> None:
    rng = random.Random(4)
    steady = learn(seed(5.0, true_s(5.0)), 200, rng)
    assert steady.shifts == 0  # 5 % noise never fires
    slowed = learn(steady, 15, rng, scale=2.0)
    assert slowed.shifts == 1


def jittered(est: SpeedEstimate, jobs: int, job_s: float, seed_: int, learning: Learning) -> int:
    """Shifts after `jobs` jobs of `job_s` seconds timed with a relay's jitter: +-10 ms, and one
    job in five delivered 45 ms late (a busy event loop)."""
    rng = random.Random(seed_)
    for _ in range(jobs):
        late = 0.045 if rng.random() < 0.2 else 0.0
        est = observe(est, 4.0, job_s + rng.uniform(-0.01, 0.01) + late, learning)
    return est.shifts


@pytest.mark.parametrize("seed_", range(5))
def test_jobs_of_tens_of_milliseconds_do_not_shift_on_timing_jitter(seed_: int) -> None:
    assert jittered(seed(4.0, 0.06), 400, 0.06, seed_, Learning()) == 0


def test_without_the_noise_floor_the_same_jitter_shifts_the_pace() -> None:
    no_floor = Learning(timing_noise_s=0.0)
    assert sum(jittered(seed(4.0, 0.06), 400, 0.06, s, no_floor) for s in range(5)) >= 3


def test_a_short_job_that_truly_slows_down_still_shifts() -> None:
    """60 ms jobs, then twice as slow: the shift comes within 5 jobs, as with no floor."""
    rng = random.Random(0)
    est = seed(4.0, 0.06)
    for _ in range(50):
        est = observe(est, 4.0, 0.06 + rng.uniform(-0.01, 0.01))
    assert est.shifts == 0
    assert jittered(est, 5, 0.12, 1, Learning()) == 1


STEADY = learn(seed(5.0, true_s(5.0)), 50, random.Random(5))
OUTLIERS = {
    "a first run's compile on a seed": (seed(10.0, true_s(10.0)), 20.0, 0.2),
    "a stalled socket's huge duration on a seed": (seed(10.0, true_s(10.0)), 100.0, 0.2),
    "a stalled socket's near-zero duration on a seed": (seed(10.0, true_s(10.0)), 1e-3, 0.2),
    "a huge duration after 50 jobs": (STEADY, 100.0, 0.05),
    "a near-zero duration after 50 jobs": (STEADY, 1e-3, 0.05),
}


@pytest.mark.parametrize(("est", "times_off", "moved"), OUTLIERS.values(), ids=OUTLIERS.keys())
def test_one_outlier_does_not_move_the_estimate_far(
    est: SpeedEstimate, times_off: float, moved: float
) -> None:
    before_s = est.predict_s(10.0)
    after = observe(est, 10.0, times_off * before_s)
    assert after.predict_s(10.0) == pytest.approx(before_s, rel=moved)
    assert after.shifts == est.shifts  # one outlier is no new regime


# An H200's SD1.5 job (512x512, 20 steps: 5.24 units) ran warm in 0.75 s; its speed probe
# (10 steps), timed right after CUDA's start-up, took 2.6 s: a seed 5-6x too slow.
JOB_UNITS, JOB_S = 5.24, 0.75
PROBE_UNITS, COLD_PROBE_S = 2.62, 2.6


@pytest.mark.parametrize("jobs", [3, 5, 12])
def test_what_is_learned_does_not_depend_on_how_many_jobs_the_policy_sent(jobs: int) -> None:
    # One policy sends a worker 3 jobs of the family, another 12: after a few, both must
    # price the next job alike (it used to move at most 3x per drift shift, so the learned
    # speed was the seed times 3 to the number of shifts the policy happened to cause).
    est = seed(PROBE_UNITS, COLD_PROBE_S)
    for _ in range(jobs):
        est = observe(est, JOB_UNITS, JOB_S)
    assert est.predict_s(JOB_UNITS) == pytest.approx(JOB_S, rel=0.15)


def test_one_job_size_keeps_the_split_between_fixed_and_per_unit_time() -> None:
    est = seed(JOB_UNITS, 1.0)
    for _ in range(10):
        est = observe(est, JOB_UNITS, 1.2)
    assert est.fixed_s / est.predict_s(JOB_UNITS) == pytest.approx(0.2, abs=0.02)
    assert est.predict_s(2 * JOB_UNITS) == pytest.approx(1.2 * 1.8, rel=0.05)


def test_tiny_jobs_do_not_change_the_price_of_big_ones() -> None:
    # On one H200 shared by two instances: a probe alone (0.42 s), jobs beside the other
    # instance (1.4 s), so the fit's line went through zero fixed time; then 64x64 one-step
    # jobs (0.004 units, 0.06 s: all fixed time) fired the drift detector and rescaled the
    # per-unit speed 20x, to 0.13 units/s.
    shared_s = 1.4
    est = seed(PROBE_UNITS, 0.42)
    for _ in range(8):
        est = observe(est, JOB_UNITS, shared_s)
    for _ in range(4):
        est = observe(est, 0.004, 0.06)
    assert est.predict_s(JOB_UNITS) == pytest.approx(shared_s, rel=0.15)


def test_a_slow_probe_and_one_job_size_keep_the_split_between_fixed_and_per_unit_time() -> None:
    """On a real H200 (run 11): a 10-step probe timed right after CUDA's start-up took 0.845 s,
    then 20-step jobs took 0.85 s. The line through the two sizes was nearly flat (51 units/s,
    0.79 s fixed), so a job of four times the work was priced at 1.3x. Only the jobs' own
    sizes may redraw the split: the level follows them, the shape stays the seed's."""
    prior = est = seed(PROBE_UNITS, 0.845)
    for _ in range(3):
        est = observe(est, JOB_UNITS, 0.85)
    assert est.predict_s(JOB_UNITS) == pytest.approx(0.85, rel=0.3)
    assert est.predict_s(4 * JOB_UNITS) > 2.5 * est.predict_s(JOB_UNITS)
    share = prior.fixed_s / prior.predict_s(JOB_UNITS)
    assert est.fixed_s / est.predict_s(JOB_UNITS) == pytest.approx(share, rel=0.05)
