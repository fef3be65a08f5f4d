"""What the gateway learns from finished jobs, and what the dispatcher then shows the policy."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.app import load_policy
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.links import Held, Links, WorkerLink
from gateway.dispatch.outcomes import Outcomes
from gateway.dispatch.relay import Relay
from gateway.events.hub import Hub
from gateway.farm.describe import learned_fields
from gateway.jobs.models import JobRecord, JobState, NewJob, Placement
from gateway.jobs.store import JobStore
from gateway.learning import learn as learning
from gateway.learning import speed as learned_speed
from gateway.learning import timing
from gateway.learning.learn import Finished, Knowledge, NodeClock
from gateway.learning.residency import Evidence
from gateway.scheduler.cost import FIRST_USE_S
from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView
from gateway.scheduler.timescale import emulated, in_emulated_time
from tests.unit.gateway.conftest import FakeClock
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec
from workers.warmup.prompts import warmup_prompt

SDXL = "sd_xl_base_1.0.safetensors"
SD15 = "v1-5-pruned-emaonly.safetensors"
PROMPT = warmup_prompt(SDXL)  # loader "1", encoders "2"/"3", latent "4", sampler "5", ...


@pytest.mark.parametrize(
    ("checkpoint", "family"),
    [
        (SDXL, "sdxl"),
        ("ponyDiffusionV6.safetensors", "sdxl"),
        ("flux1-dev-fp8.safetensors", "flux"),
        (SD15, "sd15"),
        (None, "unknown"),
    ],
)
def test_the_family_comes_from_the_checkpoint_name(checkpoint: str | None, family: str) -> None:
    assert learning.family_of(checkpoint) == family


@pytest.mark.parametrize(
    ("args", "vram_total_mib", "launched", "slots"),
    [
        ((), None, True, 1),  # classic cache
        # N counts node results: 8 are about one txt2img prompt's (7), 22 hold four in turn
        (("--cache-lru", "8"), None, True, 1),
        (("--cache-lru=10",), None, True, 2),
        (("--cache-lru", "22"), None, True, 4),
        (("--cache-lru", "22"), 12282.0, True, 1),  # one SDXL fits on a 12 GB card
        (("--cache-lru", "0"), None, True, 1),  # 0 leaves the classic cache
        ((), 143771.0, True, 4),  # the gateway adds --cache-lru 22 on an H200
        ((), 143771.0, False, 1),  # ...but not to an instance someone else started
        (("--cache-classic",), 143771.0, True, 1),
    ],
)
def test_cache_slots_follow_the_cache_mode_and_the_card(
    args: tuple[str, ...], vram_total_mib: float | None, launched: bool, slots: int
) -> None:
    assert learning.cache_slots(args, vram_total_mib, launched=launched) == slots


def clocked(*steps: tuple[str | None, float], cached: tuple[str, ...] = ()) -> NodeClock:
    clock = NodeClock(started_s=0.0, since_s=0.0)
    clock = learning.on_cached(clock, list(cached))
    for node, at_s in steps:
        clock = learning.on_executing(clock, node, at_s)
    return clock


def view(checkpoint: str = SDXL, work_units: float = 20.0, job_id: str = "j") -> JobView:
    return JobView(
        job_id,
        0.0,
        model_keys=frozenset((checkpoint,)),
        checkpoint=checkpoint,
        family=learning.family_of(checkpoint),
        work_units=work_units,
    )


def test_executing_transitions_split_into_load_and_warm_run() -> None:
    clock = clocked(("1", 0.0), ("2", 3.0), ("5", 3.5), ("6", 9.5), (None, 10.0))
    done = learning.finished(view(), PROMPT, clock)
    assert done.load_s == pytest.approx(3.0)
    assert done.run_s == pytest.approx(7.0)
    assert done.loader_cached is False


def test_a_cached_loader_means_the_checkpoint_was_resident() -> None:
    clock = clocked(("2", 0.0), ("5", 0.5), (None, 6.0), cached=("1",))
    done = learning.finished(view(), PROMPT, clock)
    assert done.loader_cached is True and done.load_s == 0.0
    assert done.run_s == pytest.approx(6.0)


def test_an_untimed_job_still_moves_residency() -> None:
    done = learning.finished(view(), PROMPT, None)
    after = learning.learn(Knowledge(resident=(SD15,)), done, slots=1)
    assert after.resident == (SDXL,)
    assert after.book == {}


def test_speed_is_seeded_by_the_first_job_then_observed() -> None:
    known = Knowledge()
    for seconds in (5.0, 5.0, 5.0):
        done = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=0.0, run_s=seconds)
        known = learning.learn(known, done, slots=1)
    estimate = known.book["sdxl"]
    assert estimate.predict_s(20.0) == pytest.approx(5.0)
    speed, fixed_s = learning.speed_views(known.book)
    assert speed["sdxl"] == pytest.approx(estimate.speed)
    assert fixed_s["sdxl"] == pytest.approx(estimate.fixed_s)


def test_a_real_load_updates_the_key_and_its_family() -> None:
    known = Knowledge(load_s={SDXL: 4.0}, resident=(SD15,))
    done = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=6.0, run_s=5.0, loader_cached=False)
    after = learning.learn(known, done, slots=1)
    assert after.load_s[SDXL] == pytest.approx(5.0)  # smoothed
    assert after.load_s["sdxl"] == pytest.approx(6.0)


def test_a_job_that_loaded_teaches_the_load_with_the_copy_to_vram_not_the_speed() -> None:
    warm = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=0.0, run_s=5.0, loader_cached=True)
    known = learning.learn(Knowledge(resident=(SDXL,)), warm, slots=1)
    # the sampler also copied the weights to VRAM: 3 s beyond the warm 5 s
    cold = Finished("sdxl", 20.0, frozenset((SD15,)), load_s=2.0, run_s=8.0, loader_cached=False)
    after = learning.learn(known, cold, slots=1)
    assert after.book == known.book
    assert after.load_s[SD15] == pytest.approx(5.0)
    assert after.resident == (SD15,)


def test_a_short_load_phase_is_no_load_measurement() -> None:
    known = Knowledge(load_s={SDXL: 4.0}, resident=(SDXL,))
    done = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=0.1, run_s=5.0, loader_cached=False)
    assert learning.learn(known, done, slots=1).load_s == {SDXL: 4.0}


@pytest.mark.parametrize(
    ("believed", "evidence", "slots", "after"),
    [
        ((SD15,), Evidence(frozenset((SDXL,))), 1, (SDXL,)),
        ((SD15,), Evidence(frozenset((SDXL,))), 4, (SDXL, SD15)),
        # it loaded what was believed resident with another: the cache held less than believed
        ((SD15, SDXL), Evidence(frozenset((SDXL,)), loader_cached=False), 4, (SDXL,)),
        ((SD15,), Evidence(frozenset()), 1, (SD15,)),
    ],
)
def test_residency_follows_the_jobs_and_the_evidence(
    believed: tuple[str, ...], evidence: Evidence, slots: int, after: tuple[str, ...]
) -> None:
    assert learning.believed_after(believed, evidence, slots) == after


def test_outstanding_seconds_carry_residency_forward() -> None:
    worker = WorkerView(
        "w", resident=(SD15,), speed={"sdxl": 4.0}, fixed_s={"sdxl": 1.0}, load_s={SDXL: 10.0}
    )
    running = (view(SD15, job_id="a"), 0.0)  # sd15: 20 / the mean speed of known families
    first = (view(SDXL, job_id="b"), 2.0)  # loads, then runs 6 s, 2 already spent
    second = (view(SDXL, job_id="c"), 0.0)  # warm by then
    total = learning.outstanding_s(worker, [running, first, second])
    assert total == pytest.approx(5.0 + (10.0 + 6.0 - 2.0) + 6.0)


@pytest.mark.parametrize(
    ("held", "expected_s"),
    [
        ([], 0.0),  # idle: not priced with it (see `outstanding_s`)
        ([(view(SD15, job_id="a"), 2.0)], FIRST_USE_S + 5.0 - 2.0),  # the running job pays it
        ([(view(SD15, job_id="a"), 0.0), (view(SD15, job_id="b"), 0.0)], FIRST_USE_S + 10.0),
        ([(view(SD15, job_id="a"), 30.0)], 0.0),  # it ran past the estimate: due now
    ],
)
def test_a_cold_worker_pays_the_cards_first_use_once_on_the_first_job_it_holds(
    held: list[tuple[JobView, float]], expected_s: float
) -> None:
    worker = WorkerView("w", resident=(SD15,), speed={"sd15": 4.0})  # 20 work units: 5 s
    assert learning.outstanding_s(worker, held, cold=True) == pytest.approx(expected_s)
    warm_s = learning.outstanding_s(worker, held)
    assert warm_s == pytest.approx(max(expected_s - FIRST_USE_S, 0.0))


def test_arrivals_count_each_job_once() -> None:
    jobs = [view(job_id="a"), view(job_id="b")]
    arrivals = learning.arrived(learning.Arrivals(), jobs)
    again = learning.arrived(arrivals, jobs)
    assert again is arrivals
    assert len(arrivals.seen) == 2
    assert arrivals.meter.rates[SDXL][0] > 0


def record(job_id: str, checkpoint: str = SDXL) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        state=JobState.ASSIGNED,
        number=1,
        priority=0,
        client_id=None,
        prompt_json=json.dumps(PROMPT),
        extra_json="{}",
        outputs_json="[]",
        targets_json=None,
        placement=Placement(checkpoint, (checkpoint,), 20.0),
        attempt=1,
        failures=0,
        worker="w",
        enqueued_at_ms=0,
        claimed_at_ms=None,
        started_at_ms=None,
        finished_at_ms=None,
        error=None,
    )


def link_of(args: tuple[str, ...] = ()) -> WorkerLink:
    handle = WorkerHandle(WorkerSpec("w", args=args), "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s")


async def test_the_relay_times_nodes_and_the_dispatcher_shows_what_was_learned(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    now = FakeClock(100.0)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    link = link_of(("--cache-lru", "22"))
    link.hold("a", Held(1, None, SD15, (SD15,), record=record("a", SD15), sid="s"))
    link.hold("b", Held(1, None, SDXL, (SDXL,), record=record("b"), sid="s"))
    link.learn(Finished("sd15", 20.0, frozenset((SD15,)), load_s=0.0, run_s=2.0))
    relay = Relay(link, store, hub, outcomes=None, on_connect=None, clock=now)  # type: ignore[arg-type]
    frames: list[tuple[float, dict[str, Any]]] = [
        (0.0, {"type": "execution_start", "data": {"prompt_id": "a"}}),
        (0.0, {"type": "execution_cached", "data": {"prompt_id": "a", "nodes": ["1"]}}),
        (0.0, {"type": "executing", "data": {"prompt_id": "a", "node": "5"}}),
    ]
    for advance_s, frame in frames:
        now.advance(advance_s)
        await relay.handle(frame)
    now.advance(1.5)
    held = link.held["a"]
    assert held.clock is not None and held.clock.cached == {"1"}
    dispatcher = Dispatcher(store, Links([link]), load_policy("affinity"), hub, clock=now)
    shown = dispatcher._view(link)
    assert shown.cache_slots == 4
    assert shown.queued == (frozenset((SDXL,)),)  # the prefetched job, not the running one
    assert shown.fixed_s["sd15"] + 20.0 / shown.speed["sd15"] == pytest.approx(2.0)
    assert shown.resident == (SD15,)
    # the running sd15 job has 0.5 s left; the sdxl one loads (10 s by default) and runs at
    # the speed of the only known family, without its fixed seconds
    assert shown.outstanding_s == pytest.approx(0.5 + 10.0 + 20.0 / shown.speed["sd15"])
    await asyncio.gather(*relay._writes)


def test_an_emulated_h200_keeps_what_its_launch_added() -> None:
    handle = WorkerHandle(WorkerSpec("w", emulate="h200"), "http://127.0.0.1:9")
    assert WorkerLink(handle, ComfyClient(handle.url), sid="s").cache_slots == 4
    classic = WorkerHandle(WorkerSpec("w", emulate="h200", args=("--cache-classic",)), "x")
    assert WorkerLink(classic, ComfyClient(handle.url), sid="s").cache_slots == 1


def test_a_policy_in_front_of_emulators_sees_emulated_seconds() -> None:
    worker = WorkerView(
        "w", outstanding_s=1.0, speed={"sdxl": 10.0}, load_s={SDXL: 0.5}, idle_since_s=2.0
    )
    snapshot = Snapshot(3.0, (view(),), (worker,), {SDXL: 4.0})
    seen = emulated(snapshot, 10.0)
    assert seen.now_s == 30.0 and seen.jobs[0].enqueued_at_s == 0.0
    (shown,) = seen.workers
    assert (shown.outstanding_s, shown.speed, shown.load_s) == (10.0, {"sdxl": 1.0}, {SDXL: 5.0})
    assert shown.idle_since_s == 20.0 and seen.demand_per_s == {SDXL: pytest.approx(0.4)}
    policy = load_policy("sticky")
    assert in_emulated_time(policy, 1.0) is policy
    assert in_emulated_time(policy, 0.1).name == "sticky"


def test_a_card_that_slows_down_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    link = link_of()
    warm = Finished("sd15", 10.0, frozenset({"a.safetensors"}), 0.0, 1.0, True)
    for _ in range(30):
        link.learn(warm)
    assert not [r for r in caplog.records if "throttled" in r.message]
    slow = Finished("sd15", 10.0, frozenset({"a.safetensors"}), 0.0, 2.5, True)
    for _ in range(20):
        link.learn(slow)
    reports = [r for r in caplog.records if "throttled or shared" in r.message]
    assert len(reports) == 1, [r.message for r in reports]
    assert "runs sd15" in reports[0].message
    assert learning.shifted({}, link.speed_book) == []  # a new family is no shift


async def test_a_started_job_s_models_count_as_resident_its_load_still_as_work(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    now = FakeClock(100.0)
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    link = link_of()  # classic cache: one checkpoint at a time
    link.learn(Finished("sd15", 20.0, frozenset((SD15,)), load_s=0.0, run_s=2.0))
    assert link.resident == (SD15,)
    link.hold("x", Held(1, None, SDXL, (SDXL,), record=record("x"), sid="s"))
    relay = Relay(link, store, hub, outcomes=None, on_connect=None, clock=now)  # type: ignore[arg-type]
    dispatcher = Dispatcher(store, Links([link]), load_policy("affinity"), hub, clock=now)
    assert dispatcher._view(link).resident == (SD15,)  # sent, not started: SD15 still there
    await relay.handle({"type": "execution_start", "data": {"prompt_id": "x"}})
    await relay.handle({"type": "executing", "data": {"prompt_id": "x", "node": "1"}})
    now.advance(1.0)
    shown = dispatcher._view(link)
    assert shown.resident == (SDXL,)  # the sdxl job replaced it, though it has not ended
    # ...and its load (10 s by default) is still counted as work to do, less the second spent
    assert shown.outstanding_s == pytest.approx(10.0 + 20.0 / shown.speed["sd15"] - 1.0)
    await asyncio.gather(*relay._writes)


# -- only what executed teaches ----------------------------------------------------------------

# ComfyUI's default graph (script_examples/websockets_api_example.py), its VAE from a loader.
GRAPH: dict[str, Any] = {
    "3": {
        "class_type": "KSampler",
        "inputs": {"steps": 20, "model": ["4", 0], "latent_image": ["5", 0]},
    },
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": SDXL}},
    "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1]}},
    "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["10", 0]}},
    "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0]}},
    "10": {"class_type": "VAELoader", "inputs": {"vae_name": "sdxl_vae.safetensors"}},
}
# websockets_api_example_ws_images.py: the same graph, its output a SaveImageWebsocket node
WS_GRAPH = {
    **{k: v for k, v in GRAPH.items() if k != "9"},
    "save_image_websocket_node": {"class_type": "SaveImageWebsocket", "inputs": {}},
}
UNITS = 20 * 1024 * 1024 / 1e6  # the sampler's steps x megapixels
STEP_S = 0.25  # 20 steps: 5 s of sampling
WARM = (("6", 0.1), ("3", 0.0), ("8", 0.5), ("9", 0.2))  # what a new seed re-runs
COLD = (("4", 2.0), ("7", 0.1), *WARM)  # a load: the loader and both encoders run


def ran(
    executed: tuple[tuple[str, float], ...],
    *,
    cached: tuple[str, ...] = (),
    setup_s: float = 0.0,
    progress: bool = True,
    worker_span_x: float = 1.0,
    ended: str = "execution_success",
) -> NodeClock:
    """The clock of a prompt as the relay builds it: the `executed` nodes (id, seconds) run in
    order; the sampler "3" spends `setup_s`, then 20 steps of STEP_S, each reported (unless not
    `progress`). The worker stamps a span `worker_span_x` times what the relay saw, and ends
    it with `ended`."""
    now_s = 0.0
    clock = timing.started({"timestamp": 1_000_000}, now_s)
    clock = timing.on_event(clock, "execution_cached", {"nodes": list(cached)}, now_s)
    for node, seconds in executed:
        clock = timing.on_event(clock, "executing", {"node": node}, now_s)
        if node != "3":
            now_s += seconds
            continue
        now_s += setup_s
        for step in range(1, 21):
            now_s += STEP_S
            if progress:
                data = {"node": node, "value": step, "max": 20}
                clock = timing.on_event(clock, "progress", data, now_s)
    stamp_ms = 1_000_000 + round(now_s * 1000 * worker_span_x)
    clock = timing.on_event(clock, ended, {"timestamp": stamp_ms}, now_s)
    return timing.on_event(clock, "executing", {"node": None}, now_s)


WARM_S = 0.1 + 5.0 + 0.5 + 0.2
RUNS = {
    "a warm run: a new seed": (
        ran(WARM, cached=("4", "5", "7", "10")),
        (UNITS, 0.0, WARM_S, 0.0, True),
    ),
    "the ws-images example after the first: only its output node runs": (
        ran((("save_image_websocket_node", 0.01),), cached=("3", "4", "5", "6", "7", "8", "10")),
        (0.0, 0.0, 0.01, 0.0, True),
    ),
    "an identical resubmission: every node cached": (
        ran((), cached=tuple(GRAPH)),
        (0.0, None, None, None, True),
    ),
    "a load: the copy to VRAM before the first step is load, the steps are speed": (
        ran(COLD, cached=("5", "10"), setup_s=3.0),
        (UNITS, 2.0, WARM_S + 0.1, 3.0, False),
    ),
    "a load whose steps were not reported": (
        ran(COLD, cached=("5", "10"), setup_s=3.0, progress=False),
        (UNITS, 2.0, WARM_S + 0.1 + 3.0, None, False),
    ),
    "a stalled socket: the worker's stamps span twice what the relay saw": (
        ran(WARM, cached=("4", "5", "7", "10"), worker_span_x=2.0),
        (UNITS, None, None, None, True),
    ),
    "an interrupted run: its sampler stopped short": (
        ran(WARM, cached=("4", "5", "7", "10"), ended="execution_interrupted"),
        (UNITS, None, None, None, True),
    ),
}


@pytest.mark.parametrize(("clock", "expected"), RUNS.values(), ids=RUNS.keys())
def test_only_nodes_that_executed_are_counted(
    clock: NodeClock, expected: tuple[float, float | None, float | None, float | None, bool]
) -> None:
    prompt = WS_GRAPH if "save_image_websocket_node" in clock.node_s else GRAPH
    done = learning.finished(view(SDXL), prompt, clock)
    seen = (done.work_units, done.load_s, done.warm_s, done.setup_s, done.loader_cached)
    assert seen == pytest.approx(expected)


def known_sdxl(units_per_s: float = 5.69) -> Knowledge:
    """A worker that runs sdxl at `units_per_s`, fixed seconds included, holding SDXL."""
    estimate = learned_speed.seed(UNITS, UNITS / units_per_s)
    return Knowledge(book={"sdxl": estimate}, load_s={SDXL: 5.0, "sdxl": 5.0}, resident=(SDXL,))


LESSONS = {
    "a warm run observes the speed": (known_sdxl(UNITS / WARM_S), RUNS["a warm run: a new seed"]),
    "a cached sampler teaches no speed (was learned 3x faster)": (
        known_sdxl(),
        RUNS["the ws-images example after the first: only its output node runs"],
    ),
    "a load teaches the speed of its steps": (
        Knowledge(),
        RUNS["a load: the copy to VRAM before the first step is load, the steps are speed"],
    ),
}


@pytest.mark.parametrize(("known", "run"), LESSONS.values(), ids=LESSONS.keys())
def test_speed_is_learned_from_samplers_that_executed(known: Knowledge, run: Any) -> None:
    clock, (units, _, warm_s, _, _) = run
    prompt = WS_GRAPH if "save_image_websocket_node" in clock.node_s else GRAPH
    after = learning.learn(known, learning.finished(view(SDXL), prompt, clock), slots=1)
    if units == 0:
        assert after.book == known.book
        return
    assert after.book["sdxl"].predict_s(units) == pytest.approx(warm_s, rel=0.01)
    assert after.book["sdxl"].observations == (1 if known.book else 0)


def test_a_load_teaches_its_loader_plus_the_copy_to_vram() -> None:
    clock, _ = RUNS["a load: the copy to VRAM before the first step is load, the steps are speed"]
    known = Knowledge(load_s={SDXL: 5.0}, resident=(SD15,))
    after = learning.learn(known, learning.finished(view(SDXL), GRAPH, clock), slots=1)
    assert after.load_s[SDXL] == pytest.approx(5.0)  # 2 s read + 3 s copy
    assert after.resident == (SDXL,)


def test_a_fresh_worker_knows_its_family_after_a_load_and_three_identical_runs() -> None:
    """The websockets example four times on a fresh farm: the first loads, the rest are
    cached end to end. `learned.families` stayed empty: a load taught no speed."""
    known = Knowledge()
    first, _ = RUNS["a load: the copy to VRAM before the first step is load, the steps are speed"]
    again, _ = RUNS["an identical resubmission: every node cached"]
    for clock in (first, again, again, again):
        known = learning.learn(known, learning.finished(view(SDXL), GRAPH, clock), slots=1)
    assert set(known.book) == {"sdxl"}
    assert known.book["sdxl"].predict_s(UNITS) == pytest.approx(WARM_S + 0.1, rel=0.01)


def test_the_first_job_of_a_process_teaches_its_steps_not_its_start_up() -> None:
    # CUDA's first use and the copy: 12 s before the first step of a 5 s sampler
    clock = ran(COLD, cached=("5", "10"), setup_s=12.0)
    known = learning.learn(Knowledge(), learning.finished(view(SDXL), GRAPH, clock), slots=1)
    assert known.book["sdxl"].predict_s(UNITS) == pytest.approx(WARM_S + 0.1, rel=0.01)


@pytest.mark.parametrize(("first_use", "load_s"), [(True, 2.0), (False, 2.0 + 12.0)])
def test_the_first_use_of_a_card_is_no_load_it_pays_again(first_use: bool, load_s: float) -> None:
    """A cold worker's first prompt: 12 s before the first step, the card's first use with the
    copy. Its load is its read alone (as a warm-up teaches it); any later prompt's set-up is
    the copy of what it loaded, a load it will pay again."""
    clock = ran(COLD, cached=("5", "10"), setup_s=12.0)
    done = replace(learning.finished(view(SDXL), GRAPH, clock), first_use=first_use)
    known = learning.learn(Knowledge(), done, slots=1)
    assert known.load_s[SDXL] == pytest.approx(load_s)
    assert known.book["sdxl"].predict_s(UNITS) == pytest.approx(WARM_S + 0.1, rel=0.01)


@pytest.mark.parametrize(
    ("relay_s", "worker_ms", "trusted"),
    [
        (10.0, 10_000, True),
        (10.0, 11_500, True),  # within a quarter
        (10.0, 20_000, False),  # the events came late, in a burst
        (0.001, 9_000, False),  # near-zero: a burst after a stall
        (0.02, 60, True),  # tiny jobs: tens of milliseconds of jitter are no stall
    ],
)
def test_the_worker_s_stamps_tell_whether_the_relay_s_times_hold(
    relay_s: float, worker_ms: int, trusted: bool
) -> None:
    clock = timing.started({"timestamp": 5_000}, 100.0)
    clock = timing.on_event(clock, "execution_success", {"timestamp": 5_000 + worker_ms}, 0.0)
    clock = timing.on_event(clock, "executing", {"node": None}, 100.0 + relay_s)
    assert timing.trusted(clock) is trusted


def test_progress_counts_only_for_the_node_that_runs() -> None:
    clock = timing.started({}, 0.0)
    clock = timing.on_event(clock, "executing", {"node": "3"}, 1.0)
    for node, value, at_s in (("8", 1, 1.5), ("3", 1, 2.0), ("3", True, 2.5), ("3", 3, 3.0)):
        clock = timing.on_event(clock, "progress", {"node": node, "value": value}, at_s)
    assert set(clock.steps) == {"3"}
    steps = clock.steps["3"]
    assert (steps.begin_s, steps.first_value, steps.last_value) == (1.0, 1, 3)
    assert steps.setup_s() == pytest.approx(0.5)  # 1 s to the first step, a step is 0.5 s


# -- what was never measured is estimated ------------------------------------------------------


def emulated_link(name: str, profile: str = "h200") -> WorkerLink:
    handle = WorkerHandle(WorkerSpec(name, emulate=profile), "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s")


WARM_SDXL = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=0.0, run_s=2.0, loader_cached=True)
COLD_SDXL = Finished("sdxl", 20.0, frozenset((SDXL,)), 4.0, 2.0, False, 0.0)
FARMS = {
    "a card like one that ran sdxl: its speed and load": (
        "h200",
        (COLD_SDXL, WARM_SDXL),
        (),
        ({"sdxl"}, {SDXL, "sdxl"}, 2.0),
    ),
    "another card: the farm's mean all the same, never the default": (
        "rtx4070ti",
        (COLD_SDXL, WARM_SDXL),
        (),
        ({"sdxl"}, {SDXL, "sdxl"}, 2.0),
    ),
    "once it ran sdxl itself: its own": (
        "h200",
        (COLD_SDXL, WARM_SDXL),
        (Finished("sdxl", 20.0, frozenset((SDXL,)), 8.0, 4.0, False, 0.0),),
        (set(), set(), 4.0),
    ),
}


@pytest.mark.parametrize(("card", "first", "second", "expected"), FARMS.values(), ids=FARMS.keys())
async def test_the_dispatcher_prices_a_worker_never_measured_from_the_farm(
    store: JobStore,
    redis_client: aioredis.Redis,
    card: str,
    first: tuple[Finished, ...],
    second: tuple[Finished, ...],
    expected: tuple[set[str], set[str], float],
) -> None:
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    a, b = emulated_link("a"), emulated_link("b", card)
    for done in first:
        a.learn(done)
    for done in second:
        b.learn(done)
    dispatcher = Dispatcher(store, Links([a, b]), load_policy("affinity"), hub)
    shown = dispatcher._view(b)
    families, keys, run_s = expected
    assert (shown.estimated, shown.estimated_load) == (frozenset(families), frozenset(keys))
    assert shown.card == f"emulated {card}"
    assert shown.fixed_s["sdxl"] + 20.0 / shown.speed["sdxl"] == pytest.approx(run_s)
    assert shown.load_s[SDXL] == pytest.approx(4.0 if not second else 8.0)
    status = learned_fields(b, dispatcher.estimates.of(b))
    assert set(status["estimated"]["families"]) == families
    assert set(status["estimated"]["load_s"]) == keys


# Twins: instances on the same cards, launched alike, learn from each other's jobs.


def test_a_twin_learns_the_speed_and_the_load_but_keeps_its_residency() -> None:
    origin = Knowledge(load_s={SDXL: 4.0}, resident=(SD15,))
    twin = Knowledge(resident=(SDXL,))
    done = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=6.0, run_s=5.0, loader_cached=False)
    after = learning.learn_from_twin(twin, origin, done)
    # judged where it ran: SDXL was not resident there, so the job loaded
    assert after.load_s[SDXL] == pytest.approx(6.0)
    assert after.resident == (SDXL,)
    warm = Finished("sdxl", 20.0, frozenset((SDXL,)), load_s=0.0, run_s=5.0, loader_cached=True)
    taught = learning.learn_from_twin(after, Knowledge(resident=(SDXL,)), warm)
    assert taught.book["sdxl"].predict_s(20.0) == pytest.approx(5.0)
    assert taught.load_s == after.load_s


def gpu_link(name: str, gpu: int | None = 0, args: tuple[str, ...] = ()) -> WorkerLink:
    handle = WorkerHandle(WorkerSpec(name, gpu=gpu, args=args), "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s")


def test_twins_are_the_instances_of_one_card_launched_alike() -> None:
    a, b = gpu_link("a"), gpu_link("b")
    other_card, other_args = gpu_link("c", gpu=1), gpu_link("d", args=("--lowvram",))
    no_slot = gpu_link("e", gpu=None)
    links = Links([a, b, other_card, other_args, no_slot, gpu_link("f", gpu=None)])
    assert links.twins(a) == [b] and links.twins(b) == [a]
    assert links.twins(other_card) == [] and links.twins(other_args) == []
    assert links.twins(no_slot) == []
    emulated = WorkerHandle(WorkerSpec("g", gpu=0, emulate="h200"), "http://127.0.0.1:9")
    assert WorkerLink(emulated, ComfyClient(emulated.url), sid="s").twin_key is None


async def test_a_job_on_one_instance_teaches_its_twin(
    store: JobStore, redis_client: aioredis.Redis
) -> None:
    """Through `Outcomes.complete`: the twin of the worker that ran the job learns its speed
    (two instances on one H200 learned SD1.5 at 3.2 and 4.3 units/s, one job against ten, and
    the policy's ties no longer saw them as like); a worker on another card does not."""
    a, b, c = gpu_link("a"), gpu_link("b"), gpu_link("c", gpu=1)
    links = Links([a, b, c])
    hub = Hub(redis_client, "t:events", store.queue_remaining)
    outcomes = Outcomes(store, hub, lambda: None, twins=links.twins)
    prompt = warmup_prompt(SD15)
    job = NewJob("j", prompt, {}, None, ("7",), placement=Placement(SD15, (SD15,), 20.0))
    await store.enqueue(job)
    claimed = await store.claim("j", "a")
    assert claimed is not None
    clock = clocked(("5", 0.0), (None, 2.0), cached=("1",))
    held = Held(1, None, SD15, (SD15,), record=claimed, sid="s", clock=clock)
    a.hold("j", held)
    entry = {"prompt": [0, "j", prompt, {}, ["7"]], "outputs": {}, "status": {"completed": True}}
    assert await outcomes.complete(a, "j", held, entry)
    assert "sd15" in a.speed_book
    assert b.speed_book == a.speed_book and b.lessons == 1
    assert a.resident == (SD15,) and b.resident == ()
    assert c.speed_book == {} and c.lessons == 0
