"""The guarantees of the `affinity` policy (gateway/scheduler/affinity/policy.py), each checked
on tables of farms and on random snapshots."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest

import gateway.scheduler  # noqa: F401  (registers the policies)
from gateway.scheduler.affinity.plan import settled
from gateway.scheduler.affinity.state import Queue
from gateway.scheduler.affinity.tuning import Tuning
from gateway.scheduler.cost import can_run, completion_s, load_s, run_s
from gateway.scheduler.estimates import with_estimates
from gateway.scheduler.policy import make_policy
from gateway.scheduler.queue import (
    class_key,
    group_jobs,
    groups_of,
    heads_in_order,
    queue_order,
)
from gateway.scheduler.snapshot import Assignment, JobView, Snapshot, WorkerView
from tests.unit.gateway.scheduler.factories import job, snap, worker


def placed(snapshot: Snapshot) -> list[Assignment]:
    return make_policy("affinity").assign(snapshot)


def busy(name: str, resident: tuple[str, ...], frees_in_s: float, **kw: Any) -> WorkerView:
    return worker(name, resident, free=1, outstanding=1, outstanding_s=frees_in_s, **kw)


SLOW_IDLE = worker("idle", (), speed=2.0)
DUE = worker("h", ("m1",), free=0, outstanding=1, outstanding_s=0.0)
"""A holder due to have freed by now, still running (a stalled or underestimated job)."""
SLOW_FAST = [SLOW_IDLE, busy("h", ("m2",), 3.0, speed=20.0)]
"""A slow idle card and a busy fast one that finishes an m1 job sooner, loading it."""
HELD = [worker("idle", ()), busy("h", ("m1",), 1.0)]
"""An empty idle worker and a busy like one holding m1, due to free in 1 s."""
FAST_IDLE = worker("idle", ("m2",), speed=20.0)
FULL_FAST = worker("h", ("m1",), free=0, outstanding=2, outstanding_s=1.0, speed=20.0)
"""A fast holder of m1 with no free slot, due to free in 1 s."""


def behind_a_big_job(work: float) -> Snapshot:
    """A slow idle card and a full fast holder of m1; a big job waits, then one of `work`."""
    jobs = [job("a", "m1", 4.0, work=100.0), job("b", "m1", 4.5, work=work)]
    return snap(5.0, jobs, [worker("idle", ("m1",), speed=4.0), FULL_FAST])


# Work conservation: (what, snapshot, whether the job is placed on the idle worker "idle").
CONSERVATION = {
    "an idle farm starts a lone cold job at once": (
        snap(5.0, [job("a", "m3", 5.0)], [worker("idle", ("m1",)), worker("w2", ("m2",))]),
        True,
    ),
    "a busy holder that frees before the idle load ends: wait": (
        snap(5.0, [job("a", "m1", 5.0)], [worker("idle", ("m2",)), busy("h", ("m1",), 1.0)]),
        False,
    ),
    "...however long the job has waited, while the holder is still expected to free": (
        snap(9.5, [job("a", "m1", 5.0)], [worker("idle", ("m2",)), busy("h", ("m1",), 1.0)]),
        False,
    ),
    "a holder due to have freed but still busy: wait up to the idle load (4 s)": (
        snap(8.5, [job("a", "m1", 5.0)], [worker("idle", ("m2",)), DUE]),
        False,
    ),
    "...but no longer": (
        snap(9.5, [job("a", "m1", 5.0)], [worker("idle", ("m2",)), DUE]),
        True,
    ),
    "...counted from when the worker went idle, not from the job's arrival": (
        snap(
            9.5,
            [job("a", "m1", 0.0)],
            [worker("idle", ("m2",), idle_since_s=9.0), DUE],
        ),
        False,
    ),
    "a busy holder that frees after the idle load would end: load": (
        snap(5.0, [job("a", "m1", 5.0)], [worker("idle", ("m2",)), busy("h", ("m1",), 30.0)]),
        True,
    ),
    "an idle warm worker never leaves its job, whoever frees next": (
        snap(5.0, [job("a", "m1", 5.0)], [worker("idle", ("m1",)), busy("h", ("m1",), 0.1)]),
        True,
    ),
    "a slow idle card leaves a cold job to a busy fast card that finishes it sooner": (
        snap(5.0, [job("a", "m1", 4.0)], [SLOW_IDLE, busy("h", ("m2",), 3.0, speed=20.0)]),
        False,
    ),
    # Here (4 s load, 5 s run against 0.5 s on the fast card) the bound is 4 + 4.5 s.
    "...past its load time alone, while its slowness premium lasts": (
        snap(8.5, [job("a", "m1", 4.0)], [SLOW_IDLE, busy("h", ("m2",), 3.0, speed=20.0)]),
        False,
    ),
    "...but no longer than its load plus that premium": (
        snap(12.6, [job("a", "m1", 4.0)], [SLOW_IDLE, busy("h", ("m2",), 3.0, speed=20.0)]),
        True,
    ),
    # While jobs still arrive, every waiting job pays for the idle card: three jobs that
    # arrived a second apart run the clock three times as fast (bound 8.5 s, as above).
    "...sooner while jobs arrive: the queue's waits beside it, summed, reach the bound": (
        snap(9.0, [job("a", "m1", 5.0), job("b", "m1", 6.0), job("c", "m1", 7.0)], SLOW_FAST),
        True,
    ),
    "...not before (3.5 + 2.5 + 1.5 s < 8.5 s)": (
        snap(8.5, [job("a", "m1", 5.0), job("b", "m1", 6.0), job("c", "m1", 7.0)], SLOW_FAST),
        False,
    ),
    "...each wait counted from when the worker went idle (3 x 0.5 s)": (
        snap(
            7.0,
            [job("a", "m1", 0.0), job("b", "m1", 1.0), job("c", "m1", 2.0)],
            [worker("idle", (), speed=2.0, idle_since_s=6.5), SLOW_FAST[1]],
        ),
        False,
    ),
    "...and once arrivals have stopped (a batch), the next job's own wait alone (4 s)": (
        snap(8.0, [job(x, "m1", 4.0) for x in "abc"], SLOW_FAST),
        False,
    ),
    # The holder frees in 1 s and runs each job in 1 s, three jobs in 4 s; the idle worker
    # would load for 4 s and finish one in 5 s. Arrivals are counted one standard error low:
    # 2 - sqrt(2) in the 0.4 s since the first, more than the holder's 1 job/s.
    "an empty idle worker loads at once where the holder cannot keep up with the arrivals": (
        snap(5.0, [job(x, "m1", at) for x, at in (("a", 4.6), ("b", 4.8), ("c", 5.0))], HELD),
        True,
    ),
    "...but not where they arrive slower than it serves them (it clears them in 4 / 0.97 s)": (
        snap(25.0, [job(x, "m1", at) for x, at in (("a", 5.0), ("b", 15.0), ("c", 25.0))], HELD),
        False,
    ),
    "...nor once arrivals have stopped": (
        snap(10.0, [job(x, "m1", at) for x, at in (("a", 4.6), ("b", 4.8), ("c", 5.0))], HELD),
        False,
    ),
    "...nor where its load would evict a model": (
        snap(
            5.0,
            [job(x, "m1", at) for x, at in (("a", 4.6), ("b", 4.8), ("c", 5.0))],
            [worker("idle", ("m2",)), HELD[1]],
        ),
        False,
    ),
    "a slow idle card that would finish first takes the job at once": (
        snap(5.0, [job("a", "m1", 5.0)], [SLOW_IDLE, busy("h", ("m1",), 30.0, speed=20.0)]),
        True,
    ),
    # One checkpoint on every card: 2.5 s here, 2 + 1 s on each fast card (whose fluid
    # share of the one job would end at 2.33 s).
    "a slow idle card takes a job it finishes before any busy fast holder could": (
        snap(
            5.0,
            [job("a", "m1", 5.0)],
            [worker("idle", ("m1",), speed=4.0)]
            + [busy(f"h{i}", ("m1",), 2.0, speed=10.0) for i in range(3)],
        ),
        True,
    ),
    # The holder, its slots full, frees in 1 s and runs the big job in 5 s: it reaches the
    # small one 6.25 s from now at the earliest; the idle card finishes it in 1.25 s (the
    # big one would take it 25 s).
    "a slow idle card takes a small job from behind a big one that a busy fast holder reaches "
    "first": (behind_a_big_job(work=5.0), True),
    "...but not one the holder could reach first (8 s from now; the idle card: 10 s)": (
        behind_a_big_job(work=40.0),
        False,
    ),
    "a fast idle card that would finish first takes it from a slow warm holder at once": (
        snap(
            5.0, [job("a", "m1", 5.0, work=100.0)], [FAST_IDLE, busy("h", ("m1",), 1.0, speed=2.0)]
        ),
        True,
    ),
}


@pytest.mark.parametrize(("snapshot", "runs"), CONSERVATION.values(), ids=CONSERVATION.keys())
def test_work_conservation_with_the_ski_rental_bound(snapshot: Snapshot, runs: bool) -> None:
    assert any(a.worker == "idle" for a in placed(snapshot)) == runs


def test_a_job_left_to_a_stalled_fast_holder_is_skipped_only_within_the_bound() -> None:
    """The holder was due to free at once and still runs: the slow card takes the small job
    from behind the big one, until the big one has waited beside it its bound (25 s here,
    5 s there: 20 s); then it takes the big one. The placement's why says when a job went ahead
    of others of its group."""
    stalled = worker("h", ("m1",), free=0, outstanding=1, outstanding_s=0.0, speed=20.0)
    jobs = [job("a", "m1", 0.0, work=100.0), job("b", "m1", 1.0, work=5.0)]
    slow = worker("idle", ("m1",), speed=4.0)
    for now_s, taken in [(10.0, "b"), (25.0, "a")]:
        out = placed(snap(now_s, jobs, [slow, stalled]))
        assert [(a.job_id, a.worker) for a in out] == [(taken, "idle")], now_s
        assert out[0].why is not None and out[0].why.ahead_of == (taken == "b"), now_s


def test_a_lone_job_on_an_idle_farm_never_waits_whatever_the_cards() -> None:
    for speeds in [(10.0, 10.0), (40.0, 5.0), (5.0, 40.0)]:
        for resident in [(), ("m1",), ("m2",)]:
            workers = [worker("a", resident, speed=speeds[0]), worker("b", (), speed=speeds[1])]
            assert len(placed(snap(0.0, [job("j", "m1")], workers))) == 1


def random_farm(rng: random.Random) -> Snapshot:
    models = ["m1", "m2", "m3", "m4", "m5"][: rng.choice([1, 2, 5])]  # few: many holders
    workers = []
    for i in range(rng.randint(2, 5)):
        held = rng.randint(0, 2)
        workers.append(
            worker(
                f"w{i}",
                resident=(rng.choice(models),),
                free=2 - held,
                outstanding=held,
                outstanding_s=rng.uniform(0.5, 20.0) * held,
                speed=rng.choice([5.0, 10.0, 20.0]),
                load_s=rng.choice([1.0, 4.0, 10.0]),
            )
        )
    jobs = [
        job(f"j{i}", rng.choice(models), at_s=rng.uniform(0.0, 20.0), work=rng.uniform(5, 60))
        for i in range(rng.randint(1, 12))
    ]
    return snap(20.0, jobs, workers)


def hold_bound_s(waiting: JobView, idle: WorkerView, snapshot: Snapshot) -> float:
    """The ski-rental bound: the idle worker's load plus how much longer it runs the job than
    the fastest card for the job's family."""
    fastest_s = min(run_s(waiting, w) for w in snapshot.workers)
    return load_s(waiting, idle, idle.resident) + max(run_s(waiting, idle) - fastest_s, 0.0)


def holder_expected_to_free(
    waiting: JobView, idle: WorkerView, snapshot: Snapshot, out: list[Assignment]
) -> bool:
    """Whether other workers hold the job's models (or were given a job needing them in this
    call), one of them finishes it sooner than the idle worker, and every one is expected to
    free later: then waiting for them is cheaper than loading, and the clock has not begun."""
    jobs = {j.job_id: j for j in snapshot.jobs}
    given: dict[str, list[Assignment]] = {}
    for a in out:
        given.setdefault(a.worker, []).append(a)
    here_s = completion_s(waiting, idle)
    frees_s, sooner = [], False
    for o in snapshot.workers:
        mine = given.get(o.name, [])
        held = set(o.resident).union(*(jobs[a.job_id].model_keys for a in mine))
        if o.name == idle.name or not can_run(waiting, o) or not waiting.model_keys <= held:
            continue
        free_s = max(
            [max(o.outstanding_s, 0.0), *(a.why.done_s for a in mine if a.why is not None)]
        )
        frees_s.append(free_s)
        sooner = sooner or free_s + run_s(waiting, o) < here_s
    return sooner and min(frees_s) > 0.0


def next_of_each_group(waiting: Iterable[JobView]) -> list[JobView]:
    """The first job in queue order of each group of interchangeable jobs: the others wait
    behind it (first come, first served within a group), not beside an idle worker."""
    first: dict[str, JobView] = {}
    for one in sorted(waiting, key=queue_order):
        first.setdefault(class_key(one), one)
    return list(first.values())


def clock_s(group: list[JobView], idle: WorkerView, now_s: float, stopped: bool) -> float:
    """The waits beside the idle worker, each since the job arrived or the worker went idle,
    whichever is later: of every job of the group while jobs still arrive, of its next one
    once arrivals have stopped."""
    since_s = idle.idle_since_s or 0.0
    counted = group[:1] if stopped else group
    return sum(max(now_s - max(one.enqueued_at_s, since_s), 0.0) for one in counted)


def left_waiting_on_an_idle_worker(snapshot: Snapshot, out: list[Assignment]) -> list[str]:
    """Jobs that stay waiting beside an idle worker that got nothing, outside the exception:
    no other worker would finish them sooner, or the jobs of their group have waited, summed,
    the ski-rental bound since a holder of their models was due to free."""
    taken = {a.job_id for a in out}
    given = {a.worker for a in out}
    idle = [w for w in snapshot.workers if w.outstanding == 0 and w.name not in given]
    left = [j for j in snapshot.jobs if j.job_id not in taken]
    # Whether arrivals have stopped, as the policy reads it from the queue's groups.
    queues = [Queue.of(group) for group in groups_of(snapshot)]
    stopped = settled(snapshot.now_s, queues, Tuning().quiet_gaps)
    bad = []
    for waiting in next_of_each_group(left):
        group = sorted((j for j in left if class_key(j) == class_key(waiting)), key=queue_order)
        for w in (w for w in idle if w.free_slots > 0 and can_run(waiting, w)):
            here_s = completion_s(waiting, w)
            sooner = [
                o
                for o in snapshot.workers
                if o.name != w.name and can_run(waiting, o) and completion_s(waiting, o) < here_s
            ]
            bound_s = hold_bound_s(waiting, w, snapshot)
            beside_s = clock_s(group, w, snapshot.now_s, stopped)
            if holder_expected_to_free(waiting, w, snapshot, out):
                beside_s = 0.0  # the clock runs once a holder is due and still busy
            if not sooner or beside_s >= bound_s:
                bad.append(f"{waiting.job_id} beside {w.name}")
    return bad


@pytest.mark.parametrize("seed", range(300))
def test_no_job_waits_beside_an_idle_worker_outside_the_exception(seed: int) -> None:
    snapshot = random_farm(random.Random(seed))
    assert left_waiting_on_an_idle_worker(snapshot, placed(snapshot)) == []


BURSTS = {
    "2 jobs, 2 idle workers": (2, 2),
    "4 jobs, 2 idle workers": (4, 2),
    "3 jobs, 4 idle workers": (3, 4),
    "16 jobs, 4 idle workers": (16, 4),
}


@pytest.mark.parametrize(("jobs", "workers"), BURSTS.values(), ids=BURSTS.keys())
def test_a_burst_uses_every_idle_worker_that_shortens_it(jobs: int, workers: int) -> None:
    burst = [job(f"j{i}", f"m{i % 3}") for i in range(jobs)]
    farm = [worker(f"w{i}", free=2) for i in range(workers)]
    out = placed(snap(0.0, burst, farm))
    assert len({a.worker for a in out}) == min(jobs, workers)


def test_a_burst_of_one_model_is_split_where_a_second_load_shortens_it() -> None:
    # Eight 1 s jobs, a 4 s load: alone 12 s, on two workers 8 s.
    burst = [job(f"j{i}", "m1") for i in range(8)]
    out = placed(snap(0.0, burst, [worker("a", free=2), worker("b", free=2)]))
    assert {a.worker for a in out} == {"a", "b"}


def two_families(name: str, resident: tuple[str, ...]) -> WorkerView:
    """An idle worker with 2 free slots: SD1.5 loads in 1 s, SDXL in 6 s, 10 units/s."""
    return WorkerView(
        name=name,
        free_slots=2,
        resident=resident,
        idle_since_s=0.0,
        speed={"sd15": 10.0, "sdxl": 10.0},
        load_s={"sd15": 1.0, "sdxl": 6.0},
    )


# Which queue the free worker "c" loads for: five 2 s SDXL jobs on m1 (its holder alone 10 s)
# and three 1 s SD1.5 jobs on m2 (its holder alone 3 s). Helping m1 ends it at 8 s instead of
# 10; helping m2 saves 1 s of a queue that ends first anyway, although its load is cheaper.
BOTTLENECK_JOBS = [job(f"x{i}", "m1", family="sdxl", work=20.0) for i in range(5)] + [
    job(f"s{i}", "m2", work=10.0) for i in range(3)
]
HELPS = {
    "the queue its holders would finish last, not the cheapest load": (
        BOTTLENECK_JOBS,
        "m1",
    ),
    "a queue nobody holds before helping a held one": (
        [*BOTTLENECK_JOBS, job("lone", "m4", work=10.0)],
        "m4",
    ),
}


@pytest.mark.parametrize(("jobs", "model"), HELPS.values(), ids=HELPS.keys())
def test_a_free_worker_loads_where_it_shortens_a_queue_most(
    jobs: list[JobView], model: str
) -> None:
    farm = [two_families("a", ("m1",)), two_families("b", ("m2",)), two_families("c", ("m3",))]
    out = placed(snap(0.0, jobs, farm))
    by_id = {j.job_id: j for j in jobs}
    first_on_c = next(a for a in out if a.worker == "c")
    assert by_id[first_on_c.job_id].checkpoint == model


def test_a_card_never_measured_gets_a_share_of_a_burst() -> None:
    burst = [job(f"j{i}", "m1") for i in range(10)]
    # As the dispatcher and the simulator show it: estimated from the card it shares a kind with.
    fresh = WorkerView(name="fresh", free_slots=2, idle_since_s=0.0, card="h200")
    known = worker("known", ("m1",), free=2, card="h200")
    out = placed(snap(0.0, burst, list(with_estimates((known, fresh)))))
    assert "fresh" in {a.worker for a in out}


def test_an_old_cold_job_is_served_before_a_stream_of_warm_ones() -> None:
    """The response ratio of a waiting job grows without bound: a lone cold job behind a warm
    queue is served once it has waited long enough, never starved."""
    warm = [job(f"w{i}", "m1", at_s=99.0) for i in range(8)]
    for waited_s, served in [(1.0, False), (500.0, True)]:
        cold = job("cold", "m2", at_s=100.0 - waited_s)
        snapshot = snap(100.0, [cold, *warm], [busy("only", ("m1",), 0.5)])
        assert ("cold" in {a.job_id for a in placed(snapshot)}) == served


def test_a_load_serves_the_queue_it_buys_most_for_and_a_lone_job_still_gets_its_turn() -> None:
    """Among queues no worker holds, loads rank by waited + cost over the first job's cost: one
    load (4 s) for ten jobs that each waited 1 s comes before a lone job that waited 5 s (the
    response ratio over the whole share would take the lone job: 2.0 against 1.7); the lone
    job's turn comes as its wait grows, without bound."""
    crowd = [job(f"c{i}", "m1", at_s=99.0) for i in range(10)]
    for waited_s, first in [(5.0, "c0"), (500.0, "lone")]:
        lone = job("lone", "m2", at_s=100.0 - waited_s)
        (only,) = placed(snap(100.0, [lone, *crowd], [worker("only", ("m0",))]))
        assert only.job_id == first


def test_a_decision_sees_groups_not_jobs() -> None:
    """Jobs of one group beyond its head are counted in its aggregates: the policy sees their
    work (a second copy is loaded for 200 queued jobs, not for the 4 shown)."""
    many = [job(f"j{i}", "m1", at_s=0.0) for i in range(200)]
    groups = group_jobs(many, head=4)
    workers = [busy("holder", ("m1",), 0.5), busy("other", ("m2",), 0.5)]
    snapshot = Snapshot(1.0, heads_in_order(groups), tuple(workers), groups=groups)
    assert "other" in {a.worker for a in placed(snapshot)}
    few = group_jobs(many[:4], head=4)
    snapshot = Snapshot(1.0, heads_in_order(few), tuple(workers), groups=few)
    assert "other" not in {a.worker for a in placed(snapshot)}


def test_each_placement_says_why_with_the_runner_up() -> None:
    # m1 is warm on "warm" (1 s); "cold" would load it first (4 s + 1 s).
    out = placed(snap(0.0, [job("a", "m1")], [worker("warm", ("m1",)), worker("cold", ())]))
    (only,) = out
    assert only.worker == "warm"
    assert only.why is not None
    assert (only.why.reason, only.why.runner_up) == ("warm", "cold")
    assert only.why.done_s == pytest.approx(1.0)
    assert only.why.runner_up_done_s == pytest.approx(5.0)


# 4. Where a job goes: finish times within `tie_share` of the earliest are tied. A warm job goes
# to the tied holder that alone holds the fewest models; a load to a warm worker, then the least
# eviction cost, then the least reload its evicted models' traffic will cost (jobs per second
# times load seconds), then the one holding the fewest models.
DEAR = worker("dear", ("m2", "m1"), cache_slots=2)
"""Full: loading m3 evicts m1 (its least recently used)."""
CHEAP = worker("cheap", ("m4", "m5", "m6"), cache_slots=3)
"""Full, holding more than `DEAR`: loading m3 evicts m6, which nothing asks for."""
NEEDS_M1 = job("b", "m1", 9.5, model_keys=frozenset(("m1", "m7")))
"""A waiting job that needs m1 (with a LoRA no worker holds, so no worker is warm for it)."""
M1_TRAFFIC = {"m1": 0.5}


def holding(name: str, key: str, reload_s: float) -> WorkerView:
    """A worker whose one slot holds `key`, which takes `reload_s` to load again."""
    view = worker(name, (key,), cache_slots=1)
    return replace(view, load_s={**view.load_s, key: reload_s})


def load_of_a(
    workers: list[WorkerView], *waiting: JobView, demand_per_s: dict[str, float] | None = None
) -> Snapshot:
    """Job "a", needing m3 that no worker holds, at 10 s beside `waiting` jobs."""
    jobs = [job("a", "m3", 9.0), *waiting]
    return snap(10.0, jobs, workers, demand_per_s=demand_per_s or {})


# (what, snapshot, the worker job "a" is placed on)
LIKE_CARDS = {
    "like cards, noise apart: the one holding fewer models loads": (
        load_of_a(
            [
                worker("full", ("m1", "m2"), speed=10.5, cache_slots=4),
                worker("spare", ("m1",), cache_slots=4),
            ]
        ),
        "spare",
    ),
    "a card clearly faster (2x) takes the load, however much it holds": (
        load_of_a(
            [
                worker("full", ("m1", "m2"), speed=20.0, cache_slots=4),
                worker("spare", ("m1",), cache_slots=4),
            ]
        ),
        "full",
    ),
    "like cards: the one evicting no model a waiting job needs loads, though it holds more": (
        load_of_a([DEAR, CHEAP], NEEDS_M1),
        "cheap",
    ),
    "like cards: the one evicting no model recent traffic wants loads, though it holds more": (
        load_of_a([DEAR, CHEAP], demand_per_s=M1_TRAFFIC),
        "cheap",
    ),
    "like cards: the one whose evicted model costs the least reload loads, though wanted more": (
        load_of_a(
            [holding("big", "mx", reload_s=12.0), holding("small", "my", reload_s=3.0)],
            demand_per_s={"mx": 0.2, "my": 0.3},
        ),
        "small",
    ),
    "like cards: evicting a copy another worker also holds costs no traffic, however wanted": (
        load_of_a(
            [DEAR, CHEAP, worker("copy", ("m6",), free=0, outstanding=1, outstanding_s=5.0)],
            demand_per_s={"m1": 0.5, "m6": 0.8},
        ),
        "cheap",
    ),
    # "cheap" is asked first (the names break the tie of like cards) and leaves the job to
    # "dear", which finishes it 0.2 s sooner; the load still goes where it evicts nothing wanted.
    "like cards: an idle one that left the job to a peer a hair sooner still takes the load": (
        load_of_a(
            [
                worker("cheap", ("m6",), load_s=4.2, cache_slots=1),
                worker("dear", ("m1",), cache_slots=1),
            ],
            demand_per_s=M1_TRAFFIC,
        ),
        "cheap",
    ),
    # Done in 4 + 0.25 s against 4 + 1 s: outside the 10 % tie.
    "a card clearly faster (4x) takes the load, though it evicts a model a waiting job needs": (
        load_of_a([worker("dear", ("m2", "m1"), speed=40.0, cache_slots=2), CHEAP], NEEDS_M1),
        "dear",
    ),
}


@pytest.mark.parametrize(("snapshot", "expected"), LIKE_CARDS.values(), ids=LIKE_CARDS.keys())
def test_a_load_goes_to_a_worker_finishing_as_soon_that_keeps_the_most_held(
    snapshot: Snapshot, expected: str
) -> None:
    assert {a.job_id: a.worker for a in placed(snapshot)}.get("a") == expected


def warm_a(workers: list[WorkerView], *waiting: JobView) -> Snapshot:
    """Job "a", needing m1, at 10 s beside `waiting` jobs."""
    return snap(10.0, [job("a", "m1", 9.0), *waiting], workers)


# (what, snapshot, the worker job "a" is placed on)
WARM_TIES = {
    "like holders, noise apart: the one that alone holds no other model takes it": (
        warm_a([worker("rich", ("m1", "m2"), speed=10.5), worker("plain", ("m1",))]),
        "plain",
    ),
    "...whichever of them the faster is": (
        warm_a([worker("rich", ("m1", "m2")), worker("plain", ("m1",), speed=10.5)]),
        "plain",
    ),
    "a holder clearly faster (2x) takes it, whatever it alone holds": (
        warm_a([worker("rich", ("m1", "m2"), speed=20.0), worker("plain", ("m1",))]),
        "rich",
    ),
    "a model that another worker holds too is not counted": (
        warm_a(
            [
                worker("rich", ("m1", "m2"), speed=10.5),
                worker("plain", ("m1", "m3")),
                busy("copy", ("m2",), 5.0),
            ]
        ),
        "rich",
    ),
    "a holder that frees later is no candidate, however little it alone holds": (
        warm_a([worker("rich", ("m1", "m2")), busy("plain", ("m1",), 0.5)]),
        "rich",
    ),
}


@pytest.mark.parametrize(("snapshot", "expected"), WARM_TIES.values(), ids=WARM_TIES.keys())
def test_a_warm_job_goes_to_the_tied_holder_that_alone_holds_least(
    snapshot: Snapshot, expected: str
) -> None:
    assert {a.job_id: a.worker for a in placed(snapshot)}.get("a") == expected


def test_a_burst_over_models_held_apart_runs_warm_where_each_is_held() -> None:
    """Two like workers, one holding A, X and Y, the other A and B, two slots each; a burst of
    A, X, B, Y. A goes where it leaves X and Y their only holder: no load, each worker runs
    two jobs (a real card's burst after a run of jobs one after another)."""
    workers = [
        worker("w0", ("A", "X", "Y"), free=2, speed=10.5, cache_slots=8),
        worker("w1", ("A", "B"), free=2, cache_slots=8),
    ]
    burst = [job(name.lower(), name, 9.0 + i * 0.01) for i, name in enumerate("AXBY")]
    placed_on = {a.job_id: a.worker for a in placed(snap(10.0, burst, workers))}
    assert placed_on == {"a": "w1", "x": "w0", "b": "w1", "y": "w0"}


def test_a_burst_job_only_one_idle_worker_holds_goes_to_it_first() -> None:
    """Guarantee 5 for warm work: "both" holds m1 and m2, "m1-too" holds m1, "empty" holds
    nothing, one slot each; a burst of two m1 jobs and a longer m2 job arrives while all
    three sit idle. "both" takes the m2 job, which only it holds, although m1's is first in
    queue order: the second m1 job then waits 1 s for a holder (or no load is worth it)
    instead of the m2 job waiting 1 s for "both" or paying a load."""
    workers = [
        worker("both", ("m1", "m2"), cache_slots=2, idle_since_s=5.0),
        worker("m1-too", ("m1",), idle_since_s=5.0),
        worker("empty", (), idle_since_s=5.0),
    ]
    burst = [job("a", "m1", 9.0), job("b", "m1", 9.0), job("c", "m2", 9.0, work=30.0)]
    placed_on = {a.job_id: a.worker for a in placed(snap(10.0, burst, workers))}
    assert placed_on.get("c") == "both"
    assert placed_on.get("a") == "m1-too"


def test_a_job_that_waited_before_the_worker_went_idle_keeps_its_turn() -> None:
    """The burst rule never jumps the queue: the m1 job waited before "both" went idle (its
    other holder was busy), so "both" serves it first, oldest first, though a fresh m2 job
    that only it holds came in after."""
    workers = [
        worker("both", ("m1", "m2"), cache_slots=2, idle_since_s=9.5),
        busy("m1-too", ("m1",), 5.0),
    ]
    jobs = [job("old", "m1", 9.0), job("new", "m2", 9.8, work=30.0)]
    placed_on = {a.job_id: a.worker for a in placed(snap(10.0, jobs, workers))}
    assert placed_on == {"old": "both"}
