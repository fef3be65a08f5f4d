"""The last jobs of a batch, traded so the longest go to the workers that free first
(`gateway.scheduler.affinity.tail`)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gateway.scheduler.affinity import AffinityPolicy
from gateway.scheduler.affinity import policy as policy_module
from gateway.scheduler.affinity.lanes import cost_on, lanes_of
from gateway.scheduler.affinity.tail import TAIL_JOBS, rematch
from gateway.scheduler.cost import can_run
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView
from tests.unit.gateway.scheduler.factories import job, snap, worker


def busy(view: WorkerView, left_s: float) -> WorkerView:
    return replace(view, outstanding_s=left_s, outstanding=1)


def short_and_long(now_s: float, newest_s: float) -> Snapshot:
    """Worker A idle, B busy for 3 s more; an SD1.5 job of 1 s and an SDXL job of 8 s, neither
    model held anywhere (4 s loads)."""
    jobs = [job("short", "a", 0.0, "sd15", 10.0), job("long", "b", newest_s, "sdxl", 80.0)]
    return snap(now_s, jobs, [worker("A", free=2), busy(worker("B", resident=("c",)), 3.0)])


def finishes(snapshot: Snapshot, made: list[Assignment]) -> dict[str, float]:
    """Each placed job's expected finish, one job per worker."""
    lanes = lanes_of(snapshot)
    jobs = {j.job_id: j for j in snapshot.jobs}
    return {
        a.job_id: max(lanes[a.worker].ready_s, snapshot.now_s)
        + cost_on(lanes[a.worker], jobs[a.job_id])
        for a in made
    }


def test_once_arrivals_stop_the_long_job_goes_to_the_worker_free_now() -> None:
    """The rules alone place the short job on the idle worker (it starts cheapest) and the long
    one behind the busy worker: finishes 15 and 25 s. Traded: 22 and 18 s."""
    snapshot = short_and_long(now_s=10.0, newest_s=0.0)
    made = AffinityPolicy().assign(snapshot)
    assert {a.job_id: a.worker for a in made} == {"long": "A", "short": "B"}
    done = finishes(snapshot, made)
    assert max(done.values()) == pytest.approx(22.0)
    assert sum(done.values()) == pytest.approx(40.0)
    (short,) = [a for a in made if a.job_id == "short"]
    assert short.why is not None and short.why.runner_up == "A"
    assert short.why.done_s == pytest.approx(8.0) and short.why.runner_up_done_s == pytest.approx(
        5.0
    )


def test_while_jobs_still_arrive_the_rules_place_them_as_they_are() -> None:
    """Jobs 5 s apart, the newest 5 s ago: a stream that may bring more jobs for the worker
    free now, not a batch's end. No trade."""
    snapshot = short_and_long(now_s=10.0, newest_s=5.0)
    made = AffinityPolicy().assign(snapshot)
    assert {a.job_id: a.worker for a in made} == {"short": "A", "long": "B"}


def random_tail(rng: random.Random) -> tuple[Snapshot, list[Assignment]]:
    """2-6 workers of random speeds, loads, residency and busy seconds, one job each (random
    models, families, sizes, some pinned to a few workers), placed at random where allowed."""
    names = [f"w{i}" for i in range(rng.randint(2, 6))]
    models = ["a", "b", "c", "d"]
    workers = [
        busy(
            worker(
                name,
                resident=tuple(rng.sample(models, rng.randint(0, 2))),
                speed=rng.uniform(3.0, 20.0),
                load_s=rng.uniform(0.5, 8.0),
            ),
            rng.choice((0.0, rng.uniform(0.0, 10.0))),
        )
        for name in names
    ]
    jobs: list[JobView] = []
    for i in range(len(names)):
        pinned = (
            frozenset(rng.sample(names, rng.randint(1, len(names)))) if rng.random() < 0.3 else None
        )
        jobs.append(
            job(
                f"j{i}",
                rng.choice(models),
                0.0,
                rng.choice(("sd15", "sdxl")),
                rng.uniform(5.0, 100.0),
                eligible=pinned,
            )
        )
    order = names[:]
    rng.shuffle(order)
    made: list[Assignment] = []
    free = set(names)
    for j in jobs:
        allowed = [n for n in order if n in free and (j.eligible is None or n in j.eligible)]
        if not allowed:
            break
        made.append(Assignment(j.job_id, allowed[0]))
        free.discard(allowed[0])
    return snap(0.0, jobs[: len(made)], workers), made


@pytest.mark.parametrize("seed", range(200))
def test_a_trade_never_delays_the_last_finish_nor_the_summed_finishes(seed: int) -> None:
    """The guarantee, on random farms: the latest expected finish no later and their sum no
    larger than before; each worker as many jobs; each job where it may run."""
    snapshot, made = random_tail(random.Random(seed))
    jobs = {j.job_id: j for j in snapshot.jobs}
    traded = rematch(made, jobs, lanes_of(snapshot), snapshot.now_s)
    before, after = finishes(snapshot, made), finishes(snapshot, traded)
    assert max(after.values()) <= max(before.values()) + 1e-9
    assert sum(after.values()) <= sum(before.values()) + 1e-6
    assert sorted(a.worker for a in traded) == sorted(a.worker for a in made)
    assert sorted(a.job_id for a in traded) == sorted(a.job_id for a in made)
    views = {w.name: w for w in snapshot.workers}
    assert all(can_run(jobs[a.job_id], views[a.worker]) for a in traded)


def test_jobs_of_different_priorities_are_not_traded() -> None:
    """A priority job is placed as the rules placed it (first, where they chose)."""
    snapshot = short_and_long(now_s=10.0, newest_s=0.0)
    jobs = {j.job_id: replace(j, priority=1 if j.job_id == "short" else 0) for j in snapshot.jobs}
    made = [Assignment("short", "A"), Assignment("long", "B")]
    assert rematch(made, jobs, lanes_of(snapshot), snapshot.now_s) == made


def test_a_worker_given_two_jobs_keeps_them() -> None:
    """Only workers given one job each trade: a worker's second job finishes after its first,
    which the pairwise finishes do not see. Here A's first job and B's job would trade, judged
    as a pair (as in the first test)."""
    snapshot = short_and_long(now_s=10.0, newest_s=0.0)
    jobs = {j.job_id: j for j in snapshot.jobs}
    jobs["tiny"] = job("tiny", "a", 0.0, "sd15", 5.0)
    made = [Assignment("short", "A"), Assignment("tiny", "A"), Assignment("long", "B")]
    assert rematch(made, jobs, lanes_of(snapshot), snapshot.now_s) == made
    alone = [Assignment("short", "A"), Assignment("long", "B")]
    assert rematch(alone, jobs, lanes_of(snapshot), snapshot.now_s) != alone


def idle(name: str, slots: int = 1) -> WorkerView:
    return worker(name, free=slots)


@pytest.mark.parametrize(
    ("case", "jobs", "workers", "now_s", "traded"),
    [
        ("the batch's last two", 2, [idle("A", 2), busy(worker("B"), 3.0)], 10.0, True),
        ("jobs still arriving", 2, [idle("A"), idle("B")], 0.15, False),
        ("more jobs than workers", 3, [idle("A", 2), busy(worker("B", free=2), 3.0)], 10.0, False),
        (
            "a job left waiting",
            3,
            [idle("A"), busy(worker("B"), 3.0), worker("C", free=0)],
            10.0,
            False,
        ),
        (
            "more than TAIL_JOBS",
            TAIL_JOBS + 1,
            [idle(f"w{i}") for i in range(TAIL_JOBS + 4)],
            10.0,
            False,
        ),
    ],
)
def test_only_a_settled_call_that_places_every_job_one_per_worker_is_traded(
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    jobs: int,
    workers: list[WorkerView],
    now_s: float,
    traded: bool,
) -> None:
    """Jobs 0.1 s apart from 0 (settled at 10 s, not at 0.15 s), each of a model of its own that
    no worker holds: `rematch` is asked only for the calls guarantee 7 is about."""
    asked: list[int] = []

    def recording(made: list[Assignment], *args: object) -> list[Assignment]:
        asked.append(len(made))
        return list(made)

    monkeypatch.setattr(policy_module, "rematch", recording)
    views = [job(f"j{i}", f"m{i}", i * 0.1, "sd15", 10.0 + 10 * i) for i in range(jobs)]
    AffinityPolicy().assign(snap(now_s, views, workers))
    assert bool(asked) is traded, case
