"""The backlog's split by comparative advantage (`affinity.plan`): what it restricts, that the
fluid optimum survives the restriction, and what the policy then does with it."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from gateway.scheduler.affinity.lanes import lanes_of
from gateway.scheduler.affinity.plan import Plan, _solve, plan_of, settled
from gateway.scheduler.affinity.policy import AffinityPolicy
from gateway.scheduler.affinity.state import Farm, Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.queue import groups_of
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView
from tests.unit.gateway.scheduler.factories import job, snap
from tests.unit.gateway.scheduler.test_invariants import left_waiting_on_an_idle_worker

H200 = {"sd15": 10.0, "sdxl": 10.0}
RTX = {"sd15": 7.0, "sdxl": 5.0}
"""Relative to the first: 1.4x the seconds for SD1.5, 2x for SDXL (as the simulator's cards)."""


def card(
    name: str, speed: dict[str, float], resident: tuple[str, ...] = (), **kw: object
) -> WorkerView:
    fields: dict[str, object] = {"idle_since_s": 0.0, "free_slots": 1, **kw}
    return WorkerView(
        name=name,
        resident=resident,
        speed=dict(speed),
        load_s={"sd15": 1.0, "sdxl": 2.0},
        **fields,  # type: ignore[arg-type]
    )


def backlog(
    per_model: int, work: float = 20.0, eligible: frozenset[str] | None = None
) -> list[JobView]:
    """`per_model` jobs of each of an SD1.5 and an SDXL checkpoint, waiting since 0."""
    return [
        job(f"{model}-{i}", model, family=family, work=work, eligible=eligible)
        for model, family in (("a15", "sd15"), ("bxl", "sdxl"))
        for i in range(per_model)
    ]


def plan_for(snapshot: Snapshot, plan_s: float = 5.0) -> Plan | None:
    queues = [Queue.of(group) for group in groups_of(snapshot)]
    farm = Farm.of(snapshot, lanes_of(snapshot), (q.first.family for q in queues))
    tuning = Tuning(plan_s=plan_s)
    return plan_of(farm, queues, tuning, settled(snapshot.now_s, queues, tuning.quiet_gaps))


def test_unlike_cards_each_serve_first_what_they_are_relatively_best_at() -> None:
    plan = plan_for(snap(0.0, backlog(20), [card("h200", H200), card("rtx", RTX)]))
    assert plan is not None
    # The RTX serves SD1.5 only; its 57 s of it leave the H200 the SDXL (40 s) and the rest
    # of the SD1.5, so the H200 is the card the optimum splits: it keeps both.
    assert plan.families == {"rtx": frozenset({"sd15"})}
    assert plan.makespan_s < 50.0  # against 57 s for the RTX's SD1.5 alone: a real split


def test_like_cards_are_never_restricted() -> None:
    workers = [card(f"w{i}", {"sd15": 10.0 * (1 + 0.02 * i), "sdxl": 10.0}) for i in range(4)]
    assert plan_for(snap(0.0, backlog(50), workers)) is None


def arriving(per_model: int, gap_s: float) -> list[JobView]:
    """`backlog(per_model)`, one job every `gap_s` seconds from 0, the families in turn."""
    jobs = sorted(backlog(per_model), key=lambda j: (j.job_id.split("-")[1], j.job_id))
    return [replace(j, enqueued_at_s=i * gap_s) for i, j in enumerate(jobs)]


def test_a_short_backlog_is_left_to_the_greedy_rules_while_jobs_arrive() -> None:
    """Two jobs of each family, one a second: about 8 s of work for the two cards, under a
    10 s threshold, half a second after the last arrived."""
    workers = [card("h200", H200), card("rtx", RTX)]
    assert plan_for(snap(3.5, arriving(2, 1.0), workers), plan_s=10.0) is None
    assert plan_for(snap(3.5, arriving(2, 1.0), workers), plan_s=1.0) is not None


@pytest.mark.parametrize(
    ("now_s", "jobs", "planned"),
    [
        (0.0, backlog(2), True),  # a batch, sent at once: settled from the start
        (3.5, arriving(2, 1.0), False),  # a job a second, the last half a second ago
        (8.9, arriving(2, 1.0), False),  # quiet for 5.9 of the 6 mean gaps
        (9.0, arriving(2, 1.0), True),  # quiet for 6 mean gaps: arrivals have stopped
    ],
)
def test_a_short_backlog_is_split_once_arrivals_have_stopped(
    now_s: float, jobs: list[JobView], planned: bool
) -> None:
    """The split's one assumption, nothing more arrives, holds once arrivals stop: then the
    threshold no longer applies, and the backlog's last seconds are split too."""
    workers = [card("h200", H200), card("rtx", RTX)]
    plan = plan_for(snap(now_s, jobs, workers), plan_s=10.0)
    assert (plan is not None) == planned
    if plan is not None:
        assert plan.families == {"rtx": frozenset({"sd15"})}


@pytest.mark.parametrize(
    ("arrivals_s", "now_s", "want"),
    [
        ((5.0,), 100.0, False),  # one job: no gap to judge by
        ((5.0, 5.0), 5.0, True),
        ((0.0, 1.0, 2.0), 2.5, False),
        ((0.0, 1.0, 2.0), 8.0, True),
        ((0.0, 10.0), 69.0, False),  # one gap of 10 s: quiet for 59 s is not yet a stop
        ((0.0, 10.0), 70.0, True),
    ],
)
def test_arrivals_have_settled_after_six_mean_gaps_of_quiet(
    arrivals_s: tuple[float, ...], now_s: float, want: bool
) -> None:
    jobs = [job(f"j{i}", "m", at_s=at) for i, at in enumerate(arrivals_s)]
    queues = [Queue.of(group) for group in groups_of(snap(now_s, jobs, []))]
    assert settled(now_s, queues, Tuning().quiet_gaps) is want


def test_pinned_jobs_and_reserved_workers_are_left_out() -> None:
    pinned = backlog(20, eligible=frozenset({"rtx"}))
    workers = [card("h200", H200), card("rtx", RTX)]
    assert plan_for(snap(0.0, pinned, workers)) is None
    reserved = [card("h200", H200), card("rtx", RTX, group="tune.a")]
    assert plan_for(snap(0.0, backlog(20), reserved)) is None


@pytest.mark.parametrize(
    "eligible",
    [frozenset({"h200", "rtx"}), frozenset({"h200", "rtx", "elsewhere"})],
)
def test_jobs_every_worker_may_run_are_split_as_unmarked_ones(eligible: frozenset[str]) -> None:
    """The gateway's validation marks every job it accepts with the workers whose catalogue
    has its files: every worker, as a rule. Such a job is pinned to nobody (taking it for
    pinned left the split out of every batch through the gateway)."""
    workers = [card("h200", H200), card("rtx", RTX)]
    marked = plan_for(snap(0.0, backlog(20, eligible=eligible), workers))
    assert marked is not None
    assert marked.families == {"rtx": frozenset({"sd15"})}
    queues = {
        q.first.family: q
        for q in map(Queue.of, groups_of(snap(0.0, backlog(2, eligible=eligible), [])))
    }
    assert marked.allows("rtx", queues["sd15"])
    assert not marked.allows("rtx", queues["sdxl"])


@pytest.mark.parametrize("seed", range(60))
def test_the_fluid_optimum_survives_the_restriction(seed: int) -> None:
    """Complementary slackness: every optimal split uses only the pairs of the highest
    efficiency, so the program with every other pair removed has the same optimum; and the
    optimum is no worse than serving the families one after another with every card."""
    rng = random.Random(seed)
    families = rng.randint(2, 4)
    sizes = [rng.randint(1, 4) for _ in range(rng.randint(2, 6))]
    times = [[rng.uniform(1.0, 100.0) for _ in range(families)] for _ in sizes]
    theta, prices = _solve(times, sizes)
    one_after_another = sum(
        1.0 / sum(n / t[f] for t, n in zip(times, sizes, strict=True)) for f in range(families)
    )
    assert 1.0 / theta <= one_after_another * (1 + 1e-9)
    kept = []
    for t in times:
        efficiency = [prices[f] / t[f] for f in range(families)]
        best = max(efficiency)
        kept.append([t[f] if efficiency[f] >= best * (1 - 1e-9) else 1e6 for f in range(families)])
    restricted, _ = _solve(kept, sizes)
    assert restricted == pytest.approx(theta, rel=1e-4)  # a removed pair costs 1e6 s


def test_the_slow_card_leaves_the_family_it_holds_to_the_card_best_at_it() -> None:
    """A batch of both families: the RTX holds the SDXL checkpoint, the H200 the SD1.5 one.
    Greedy, the RTX would serve what it holds, at twice the H200's time per SDXL job; with
    the split it loads SD1.5, and the H200 (the card the optimum splits) is left its
    choice."""
    workers = [card("h200", H200, ("a15",)), card("rtx", RTX, ("bxl",))]
    greedy = AffinityPolicy(Tuning(plan_s=math.inf, quiet_gaps=math.inf)).assign(
        snap(0.0, backlog(20), workers)
    )
    assert {a.worker: a.job_id.split("-")[0] for a in greedy}["rtx"] == "bxl"
    out = AffinityPolicy().assign(snap(0.0, backlog(20), workers))
    assert {a.worker: a.job_id.split("-")[0] for a in out} == {"h200": "a15", "rtx": "a15"}
    # Each placement says what the split gave the worker it went to (nothing: unrestricted).
    why = {a.worker: a.why for a in out if a.why is not None}
    assert why["rtx"].first_choices == ("sd15",)
    assert why["rtx"].as_dict()["first_choices"] == ["sd15"]
    assert why["h200"].first_choices == ()
    assert "first_choices" not in why["h200"].as_dict()


def test_a_short_batch_is_split_by_default_and_a_stream_of_the_same_jobs_is_not() -> None:
    """Three jobs of each family, about 12 s of work: under the 30 s of `plan_s`. Sent at
    once, nothing more is coming, so the RTX leaves the SDXL it holds to the H200; arriving
    one a second, the last just now, the greedy rules decide and it serves what it holds."""
    workers = [card("h200", H200, ("a15",)), card("rtx", RTX, ("bxl",))]
    batch = AffinityPolicy().assign(snap(0.0, backlog(3), workers))
    assert {a.worker: a.job_id.split("-")[0] for a in batch}["rtx"] == "a15"
    stream = AffinityPolicy().assign(snap(5.5, arriving(3, 1.0), workers))
    assert {a.worker: a.job_id.split("-")[0] for a in stream}["rtx"] == "bxl"


def unlike_farm(rng: random.Random) -> Snapshot:
    """Two to five idle or busy cards of unlike speeds per family, a backlog of both."""
    models = [("m1", "sd15"), ("m2", "sd15"), ("m3", "sdxl"), ("m4", "sdxl")]
    workers = []
    for i in range(rng.randint(2, 5)):
        held = rng.randint(0, 2)
        speed = {family: rng.choice([3.0, 5.0, 10.0, 20.0]) for family in ("sd15", "sdxl")}
        workers.append(
            card(
                f"w{i}",
                speed,
                (rng.choice(models)[0],),
                free_slots=2 - held,
                outstanding=held,
                outstanding_s=rng.uniform(0.5, 20.0) * held,
                idle_since_s=None if held else 0.0,
            )
        )
    jobs = []
    for i in range(rng.randint(4, 40)):
        model, family = rng.choice(models)
        jobs.append(
            job(f"j{i}", model, at_s=rng.uniform(0.0, 20.0), family=family, work=rng.uniform(5, 60))
        )
    return snap(20.0, jobs, workers)


def test_random_unlike_farms_keep_work_conservation_under_the_plan() -> None:
    """Guarantee 1 (`test_invariants`) where the plan restricts workers: it orders their
    choices, it never leaves one idle beside a job it would have run."""
    planned = 0
    for seed in range(200):
        snapshot = unlike_farm(random.Random(seed))
        planned += plan_for(snapshot) is not None
        out = AffinityPolicy(Tuning(plan_s=5.0)).assign(snapshot)
        assert left_waiting_on_an_idle_worker(snapshot, out) == [], seed
    assert planned >= 50  # the plan is really in play
