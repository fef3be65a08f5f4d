"""A short simulation: the real policies against the emulator's cost model (the long runs are
benchmarks: `python -m bench.sim`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.sim.engine import JobRecord, SimConfig, Simulator, WorkerState
from bench.sim.scenario import (
    Scenario,
    build_policy,
    cards_of,
    initial_models,
    simulate,
    trace,
)
from bench.sim.trace import SimJob, catalogue
from gateway.learning.learn import outstanding_s
from gateway.scheduler.cost import FIRST_USE_S
from gateway.scheduler.policy import ASK_EVERY_S
from gateway.scheduler.settle import SETTLE_CAP_S, SETTLE_S
from gateway.scheduler.snapshot import Assignment, Snapshot
from workers.emulator.card.costmodel import JobShape, LoadTier

SHORT = Scenario(jobs=300, load=0.6, seed=1)


@pytest.mark.parametrize("policy", ["affinity", "swarm_like", "ect_greedy", "round_robin"])
def test_policies_finish_every_job_within_the_contract(policy: str) -> None:
    summary = simulate(SHORT, policy).summary
    assert summary.finished == summary.jobs


def test_affinity_loads_less_than_round_robin_and_finishes_sooner() -> None:
    # At 60 % load round robin falls behind (unstable) while loading on most jobs.
    ours = simulate(SHORT, "affinity").summary
    blind = simulate(SHORT, "round_robin").summary
    assert ours.loads_per_100 < 0.7 * blind.loads_per_100
    assert ours.p95_s < 0.5 * blind.p95_s
    assert ours.stable and not blind.stable


def test_a_burst_is_planned_close_to_its_lower_bound() -> None:
    outcome = simulate(Scenario(jobs=60, arrival="batch", seed=2), "affinity")
    assert outcome.summary.makespan_s < 1.4 * outcome.lower_bound_s


def test_learned_mode_starts_from_the_warm_up_and_learns_as_the_gateway() -> None:
    scenario = Scenario(jobs=200, load=0.6, seed=3)
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    models = catalogue(scenario.k, scenario.zipf_s)
    families = {m.name: m.family for m in models}
    initial = initial_models(scenario)
    config = SimConfig(learned_speeds=True)
    sim = Simulator(build_policy("affinity"), cards, families, initial, config, config.slots)
    # Before any job: only the warm-up's family is known, its load is the cold read from disk.
    for name, state in sim.workers.items():
        assert state.knowledge is not None
        family = families[initial[name]]
        assert set(state.knowledge.book) == {family}
        cold_read_s = state.card.model.read_s(family, LoadTier.DISK)
        assert state.knowledge.load_s[initial[name]] == pytest.approx(cold_read_s)
    result = sim.run(trace(scenario))
    assert not result.diverged
    for state in result.workers:
        assert state.knowledge is not None
        ran = {r.job.shape.family for r in result.records if r.worker == state.name}
        assert ran <= set(state.knowledge.book)  # every family it ran warm is learned
        # Learned speeds land near the truth the known-speed mode is given (a 20-step job).
        for family in ran & set(state.card.speed):
            units = 20 * (0.262144 if family == "sd15" else 1.048576)
            truth_s = state.card.fixed_s[family] + units / state.card.speed[family]
            estimate = state.knowledge.book[family]
            assert estimate.predict_s(units) == pytest.approx(truth_s, rel=0.25)


@pytest.mark.parametrize("policy", ["affinity", "ect_greedy"])
def test_a_burst_measures_the_worker_that_never_ran_a_job(policy: str) -> None:
    """Learned mode, two like cards, only the first warmed up: the second is priced from the
    first (`gateway.scheduler.estimates`), so the burst uses it and it gets measured. Priced at
    the default speed, it got none of the 8 jobs under affinity (makespan 8.3 s, not 4.9 s)."""
    scenario = Scenario(farm="uniform2", k=1, jobs=8, arrival="batch", seed=4)
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    families = {m.name: m.family for m in catalogue(scenario.k, scenario.zipf_s)}
    first, second = (card.spec.name for card in cards)
    initial = {first: next(iter(families))}
    config = SimConfig(learned_speeds=True)
    sim = Simulator(build_policy(policy), cards, families, initial, config, config.slots)
    shown = {view.name: view for view in sim.snapshot(0.0).workers}
    assert shown[second].estimated == set(families.values())
    assert shown[second].speed == pytest.approx(shown[first].speed)
    result = sim.run(trace(scenario))
    ran = {record.worker for record in result.records}
    assert ran == {first, second}
    state = sim.workers[second]
    assert state.knowledge is not None and set(state.knowledge.book) == set(families.values())


@pytest.mark.parametrize(
    ("farm", "slots"), [("1*h200", 1), ("1*h200@lru8", 1), ("1*h200@lru22", 4)]
)
def test_the_policy_is_told_the_cache_size_the_gateway_would_tell_it(farm: str, slots: int) -> None:
    """`--cache-lru N` counts node results, not checkpoints: 8 keeps one checkpoint, 22 four
    (`workers.comfy.launch_args.checkpoints_kept`). The simulator once passed N itself, so under
    `--cache-lru 8` the policy believed a load evicted nothing."""
    (card,) = cards_of(farm, 4, 1.0)
    assert card.cache_slots == slots
    sim = Simulator(build_policy("affinity"), (card,), {}, {}, SimConfig(), 1)
    (view,) = sim.snapshot(0.0).workers
    assert view.cache_slots == slots


def test_a_worker_that_never_ran_pays_its_first_use_once() -> None:
    """As an instance the gateway starts with nothing preloaded: the first job there pays the
    card's first-use penalty (the emulator's `first_job_penalty_s`); the jobs after it do not."""
    scenario = Scenario(farm="uniform2", k=1, jobs=8, arrival="batch", seed=4)
    cards = cards_of(scenario.farm, scenario.k, scenario.zipf_s)
    families = {m.name: m.family for m in catalogue(scenario.k, scenario.zipf_s)}
    first, second = (card.spec.name for card in cards)
    config = SimConfig()
    policy = build_policy("affinity")
    sim = Simulator(policy, cards, families, {first: next(iter(families))}, config, config.slots)
    result = sim.run(trace(scenario))
    on_second = sorted((r for r in result.records if r.worker == second), key=lambda r: r.start_s)
    assert len(on_second) >= 2
    card = next(card for card in cards if card.spec.name == second)
    for i, record in enumerate(on_second):
        warm_s = card.warm_s(record.job.shape)
        penalty_s = card.model.first_job_penalty_s() if i == 0 else 0.0
        assert record.run_s == pytest.approx(warm_s + penalty_s, rel=0.05), i
    assert not sim.workers[second].cold


def test_a_fresh_farm_starts_empty_and_cold_and_finishes_its_jobs() -> None:
    scenario = Scenario(farm="2*h200,2*rtx4070ti", k=4, jobs=24, arrival="batch", fresh=True)
    assert initial_models(scenario) == {}
    outcome = simulate(scenario, "affinity")
    assert outcome.summary.finished == 24
    assert outcome.lower_bound_s > 0 and outcome.summary.makespan_s >= outcome.lower_bound_s


@pytest.mark.parametrize("warm_cold", [True, False])
def test_a_cold_worker_left_idle_pays_its_first_use_on_a_warm_up_not_on_a_job(
    warm_cold: bool,
) -> None:
    """As the dispatcher does (`gateway.scheduler.warming`): on a fresh farm, one client's
    first job pays its worker's first use; the other worker warms up while idle, so no job
    there pays it. Without the warm-ups, its first job does."""
    scenario = Scenario(farm="2*h200", k=4, jobs=30, arrival="sequential", fresh=True)
    cards = {card.spec.name: card for card in cards_of(scenario.farm, scenario.k, 1.0)}
    families = {m.name: m.family for m in catalogue(scenario.k, scenario.zipf_s)}
    config = SimConfig(warm_cold=warm_cold)
    sim = Simulator(build_policy("affinity"), tuple(cards.values()), families, {}, config, 2)
    result = sim.run(trace(scenario))

    def paid_first_use(record: JobRecord) -> bool:
        card = cards[record.worker]
        return record.run_s > card.warm_s(record.job.shape) + 0.5 * card.model.first_job_penalty_s()

    paid = [record for record in result.records if paid_first_use(record)]
    assert len({r.worker for r in result.records}) == 2, "both workers ran jobs"
    assert len(paid) == (1 if warm_cold else 2)
    warmed = [w for w in sim.workers.values() if w.warm_up_s > 0]
    assert len(warmed) == (1 if warm_cold else 0)


def two_jobs_on_a_fresh_farm(
    later_s: float, same_checkpoint: bool, warm_cold: bool
) -> tuple[Simulator, dict[str, JobRecord]]:
    """Two H200s with nothing loaded; a job, then a second one `later_s` after it."""
    cards = cards_of("2*h200", 2, 1.0)
    models = catalogue(2, 1.0)
    families = {m.name: m.family for m in models}
    first, other = (JobShape(m.name, m.family, 20, 512, 512) for m in models)
    jobs = (
        SimJob("j1", 0.0, first),
        SimJob("j2", later_s, first if same_checkpoint else other),
    )
    config = SimConfig(warm_cold=warm_cold)
    sim = Simulator(build_policy("affinity"), cards, families, {}, config, 2)
    return sim, {r.job.job_id: r for r in sim.run(jobs).records}


@pytest.mark.parametrize("later_s", [0.3, 0.5, 2.0])
@pytest.mark.parametrize("same_checkpoint", [True, False])
def test_a_job_behind_a_warm_up_waits_at_most_its_load_beyond_the_first_use(
    later_s: float, same_checkpoint: bool
) -> None:
    """The promise of `gateway.scheduler.warming`: on a fresh farm of two cards, the first
    job takes one and the other warms up on its checkpoint once arrivals pause; a second job
    sent meanwhile finishes no later than without the warm-up plus what the warm-up cost
    beyond the card's first use (its load and its one small step), whatever its checkpoint."""
    warmed_sim, warmed = two_jobs_on_a_fresh_farm(later_s, same_checkpoint, warm_cold=True)
    _, plain = two_jobs_on_a_fresh_farm(later_s, same_checkpoint, warm_cold=False)
    (warmer,) = [w for w in warmed_sim.workers.values() if w.warm_up_s > 0]
    beyond_first_use_s = warmer.warm_up_s - warmer.card.model.first_job_penalty_s()

    def latency_s(record: JobRecord) -> float:
        return record.end_s - record.job.arrival_s

    assert latency_s(warmed["j2"]) <= latency_s(plain["j2"]) + beyond_first_use_s + 0.05
    assert latency_s(warmed["j1"]) == pytest.approx(latency_s(plain["j1"]))


@pytest.mark.parametrize("later_s", [0.0, 0.04, 0.2])
@pytest.mark.parametrize("same_checkpoint", [True, False])
def test_a_burst_sent_one_prompt_at_a_time_finds_the_cold_worker_free_not_warming_up(
    later_s: float, same_checkpoint: bool
) -> None:
    """A cold worker warms up only once no job has arrived for a tick (`ASK_EVERY_S`, as the
    dispatcher polls): a second prompt posted right behind the first, as a client posts a
    burst, goes to the cold worker as it would with no warm-ups at all, instead of queueing
    behind a warm-up chosen on the first prompt's checkpoint."""
    assert later_s < ASK_EVERY_S
    warmed_sim, warmed = two_jobs_on_a_fresh_farm(later_s, same_checkpoint, warm_cold=True)
    _, plain = two_jobs_on_a_fresh_farm(later_s, same_checkpoint, warm_cold=False)
    assert [w.warm_up_s for w in warmed_sim.workers.values()] == [0.0, 0.0]
    assert {r.worker for r in warmed.values()} == {"h200-0", "h200-1"}
    for job_id in warmed:
        assert warmed[job_id].end_s == pytest.approx(plain[job_id].end_s)


@pytest.mark.parametrize("one_host", [True, False])
def test_on_one_host_a_file_another_worker_read_loads_from_the_page_cache(one_host: bool) -> None:
    """Two H200s, the first holding the checkpoint; a burst of two of its jobs: the second
    worker loads it, from the host's page cache when they share one, else from disk."""
    cards = cards_of("2*h200", 1, 1.0)
    (model,) = catalogue(1, 1.0)
    first, second = (card.spec.name for card in cards)
    shape = JobShape(model.name, model.family, 20, 512, 512)
    jobs = (SimJob("j1", 0.0, shape), SimJob("j2", 0.0, shape))
    config = SimConfig(one_host=one_host, warm_cold=False)
    policy = build_policy("affinity")
    sim = Simulator(policy, cards, {model.name: model.family}, {first: model.name}, config, 2)
    (loaded,) = [r for r in sim.run(jobs).records if r.loaded]
    assert loaded.worker == second
    tier = LoadTier.PAGE_CACHE if one_host else LoadTier.DISK
    assert loaded.load_s == pytest.approx(cards[1].load_s(model.family, tier))


def estimated_s(sim: Simulator, worker: WorkerState, now_s: float) -> float:
    """What the dispatcher would show for the worker: `outstanding_s` of what it holds (its
    warm-up or running job with the seconds it ran, then its queue), from what is believed of
    it and what it held before that job, the card's first use on the first while it is cold."""
    started = worker.warming if worker.warming is not None else worker.running
    assert started is not None
    held = [(started, now_s - worker.began_s), *((view, 0.0) for view in worker.queue)]
    before = worker.knowledge.resident if worker.knowledge is not None else ()
    believed = replace(sim.believed(worker), resident=before, cache_slots=worker.card.cache_slots)
    return outstanding_s(believed, held, cold=worker.cold)


@pytest.mark.parametrize("learned", [True, False])
@pytest.mark.parametrize("jobs_at_once", [2, 4])
def test_the_policy_sees_a_busy_worker_as_the_gateway_estimates_it_not_as_it_truly_runs(
    learned: bool, jobs_at_once: int
) -> None:
    """One code path with the dispatcher (`Dispatcher._view`): a busy worker's seconds left
    are `learning.outstanding_s` of what it holds (its running job, then one prefetched when
    the burst has more jobs than workers), from what is believed of it, its first use
    included while it is cold; live, a job that runs longer than believed is believed done
    sooner, so the simulator shows it so too, not its true end."""
    cards = cards_of("2*rtx4070ti", 2, 1.0)
    models = catalogue(2, 1.0)
    families = {m.name: m.family for m in models}
    shapes = [JobShape(m.name, m.family, 30, 1024, 1024) for m in models] * (jobs_at_once // 2)
    jobs = {f"j{i}": SimJob(f"j{i}", 0.0, shape) for i, shape in enumerate(shapes)}
    config = SimConfig(learned_speeds=learned, warm_cold=False)
    sim = Simulator(build_policy("affinity"), cards, families, {}, config, 2)
    for job_id, job in jobs.items():
        sim.admit(job)
        sim.handle(0.0, "arrive", job_id, jobs)
    sim.dispatch(SETTLE_S)  # once arrivals have settled
    busy = [w for w in sim.workers.values() if w.running is not None]
    assert busy, "a burst on an idle farm starts at once"
    assert sum(len(w.queue) for w in busy) == jobs_at_once - 2, "the rest prefetched"
    for worker in busy:
        now_s = worker.began_s + 1.0
        shown = sim.worker_view(worker, now_s).outstanding_s
        assert worker.cold and shown == pytest.approx(estimated_s(sim, worker, now_s))
        assert shown != pytest.approx(worker.end_s - now_s, abs=0.01), "not the truth"


def test_the_policy_sees_a_warm_up_as_the_gateway_shows_it() -> None:
    """A cold worker warming up is shown as the dispatcher shows it: the warm-up as a job
    (`warming.warm_up_job`) that pays the card's first use, with the seconds it has run."""
    cards = cards_of("2*rtx4070ti", 2, 1.0)
    (model, _) = catalogue(2, 1.0)
    families = {m.name: m.family for m in catalogue(2, 1.0)}
    job = SimJob("j0", 0.0, JobShape(model.name, model.family, 30, 1024, 1024))
    sim = Simulator(build_policy("affinity"), cards, families, {}, SimConfig(), 2)
    sim.admit(job)
    sim.handle(0.0, "arrive", "j0", {"j0": job})
    sim.dispatch(SETTLE_S)  # once arrivals have settled
    sim.dispatch(ASK_EVERY_S)  # arrivals have paused: the other worker warms up
    (warming,) = [w for w in sim.workers.values() if w.warming is not None]
    assert warming.warming is not None and warming.warming.checkpoint == model.name
    now_s = warming.began_s + 0.5
    shown = sim.worker_view(warming, now_s).outstanding_s
    assert warming.cold and shown == pytest.approx(estimated_s(sim, warming, now_s))
    assert shown > FIRST_USE_S


class Recorder:
    """Affinity, recording when each job was first shown to it and how many jobs each ask
    showed."""

    def __init__(self) -> None:
        self.policy = build_policy("affinity")
        self.name = self.policy.name
        self.first_seen_s: dict[str, float] = {}
        self.shown: list[int] = []

    def assign(self, snapshot: Snapshot) -> list[Assignment]:
        for job in snapshot.jobs:
            self.first_seen_s.setdefault(job.job_id, snapshot.now_s)
        self.shown.append(len(snapshot.jobs))
        return self.policy.assign(snapshot)


def arrivals(gap_s: float, count: int) -> tuple[Simulator, Recorder, list[SimJob]]:
    """`count` jobs `gap_s` apart on as many H200s as they need slots, the recorder asked."""
    cards = cards_of(f"{count // 2}*h200", 2, 1.0)
    models = catalogue(2, 1.0)
    shapes = [JobShape(m.name, m.family, 20, 512, 512) for m in models]
    jobs = [SimJob(f"j{i:03d}", i * gap_s, shapes[i % 2]) for i in range(count)]
    recorder = Recorder()
    families = {m.name: m.family for m in models}
    sim = Simulator(recorder, cards, families, {}, SimConfig(warm_cold=False), 2)
    return sim, recorder, jobs


@pytest.mark.parametrize("gap_s", [0.0, 0.004, (SETTLE_CAP_S - SETTLE_S) / 3])
def test_a_burst_posted_one_prompt_at_a_time_is_shown_to_the_policy_whole(gap_s: float) -> None:
    """As the dispatcher settles (`gateway.scheduler.settle`): jobs that arrive less than
    `SETTLE_S` apart, within the cap, are all in the first snapshot the policy sees, asked
    `SETTLE_S` after the last of them."""
    assert gap_s < SETTLE_S
    sim, recorder, jobs = arrivals(gap_s, 4)
    sim.run(jobs)
    assert recorder.shown[0] == 4
    assert list(recorder.first_seen_s.values()) == [pytest.approx(3 * gap_s + SETTLE_S)] * 4


@pytest.mark.parametrize("gap_s", [0.002, 0.01, 0.05, 0.5])
def test_no_job_is_shown_to_the_policy_later_than_the_settling_cap(gap_s: float) -> None:
    """However fast jobs keep arriving, each is shown to the policy at most `SETTLE_CAP_S`
    after it arrived; a lone job `SETTLE_S` after."""
    sim, recorder, jobs = arrivals(gap_s, 40)
    sim.run(jobs)
    late_s = [recorder.first_seen_s[job.job_id] - job.arrival_s for job in jobs]
    assert max(late_s) <= SETTLE_CAP_S + 1e-9
    if gap_s > SETTLE_S:
        assert late_s == [pytest.approx(SETTLE_S)] * len(jobs)
    else:
        assert 1 < recorder.shown[0] < len(jobs)  # rounds of several


def test_with_no_settling_each_prompt_is_placed_alone() -> None:
    """The control: asked at every arrival, the policy sees the first job of a burst alone."""
    sim, recorder, jobs = arrivals(0.004, 4)
    sim.config = replace(sim.config, settle_s=0.0)
    sim.run(jobs)
    assert recorder.shown[0] == 1
