"""The warm-up run against a real emulator process: cold timings by phase, clear failures, and
the speed probe timed like the warm job it is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx
import pytest

from gateway.learning import speed as learned
from tests.unit.workers.emulator.running import Running, running_emulator
from workers.client import ComfyClient
from workers.comfy.flags import LaunchFlags
from workers.comfy.workflow import work_units
from workers.emulator.card.costmodel import CostModel, JobShape, job_phases
from workers.emulator.card.profiles import load_profile
from workers.warmup.prompts import Phase, probe_prompt, probe_work_units
from workers.warmup.run import WarmupError, warm_up

SDXL = "sd_xl_base_1.0.safetensors"
PROBE_SCALE = 0.2
"""Time scale of the speed test: the probe takes ~0.5 s, far above the socket's jitter."""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_emulator(tmp_path_factory.mktemp("preload"), time_scale=0.02) as running:
        yield running


@pytest.fixture
async def client(emulator: Running) -> AsyncIterator[ComfyClient]:
    client = ComfyClient(emulator.url)
    yield client
    await client.aclose()


async def test_a_cold_start_is_timed_by_phase_and_pays_the_load_once(client: ComfyClient) -> None:
    cold = await warm_up(client, "A.safetensors", timeout_s=10)
    warm = await warm_up(client, "A.safetensors", timeout_s=10)
    assert set(cold.phase_s) >= {Phase.LOAD, Phase.ENCODE, Phase.SAMPLE, Phase.DECODE}
    assert cold.load_s is not None and cold.load_s > 0
    assert cold.seconds > 2 * warm.seconds  # CUDA set-up and the load are paid once
    assert sum(cold.phase_s.values()) <= cold.seconds


async def test_an_unknown_checkpoint_is_a_warm_up_error(client: ComfyClient) -> None:
    with pytest.raises(WarmupError, match=r"warm-up of nope\.safetensors failed"):
        await warm_up(client, "nope.safetensors", timeout_s=10)


async def test_a_failing_node_is_a_warm_up_error(client: ComfyClient, emulator: Running) -> None:
    async with httpx.AsyncClient(base_url=emulator.url) as http:
        await http.post("/emulator/faults", json={"fail_node": "KSampler", "fail_message": "OOM"})
    with pytest.raises(WarmupError, match="execution_error: OOM"):
        await warm_up(client, "B.safetensors", timeout_s=10)


async def test_the_probe_follows_the_warm_up_unless_turned_off(client: ComfyClient) -> None:
    probed = await warm_up(client, "C.safetensors", timeout_s=10, probe_steps=3)
    plain = await warm_up(client, "C.safetensors", timeout_s=10, probe_steps=0)

    assert probed.family == "sd15"
    assert probed.probe_units == pytest.approx(probe_work_units("sd15", 3))
    assert probed.probe_s is not None and probed.probe_s > 0
    assert plain.probe is None


class ProbeFailing(ComfyClient):
    """A client that arms a failing sampler on the emulator just before the probe is sent."""

    def __init__(self, url: str, fault: Mapping[str, Any]):
        super().__init__(url)
        self.fault = fault

    async def submit(self, prompt_id: str, prompt: Mapping[str, Any], **kwargs: Any) -> Any:
        if prompt["4"]["inputs"]["width"] > 64:  # the probe, not the 64x64 warm-up
            async with httpx.AsyncClient(base_url=self.base_url) as http:
                await http.post("/emulator/faults", json=self.fault)
        return await super().submit(prompt_id, prompt, **kwargs)


@pytest.mark.parametrize(
    "fault",
    [
        {"fail_node": "KSampler", "fail_message": "OOM"},
        {"fail_validation": True},
    ],
)
async def test_a_failed_probe_only_leaves_the_result_without_one(
    emulator: Running, fault: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    client = ProbeFailing(emulator.url, fault)
    try:
        result = await warm_up(client, "A.safetensors", timeout_s=10)
    finally:
        await client.aclose()

    assert result.probe is None
    assert Phase.SAMPLE in result.phase_s  # the warm-up itself was timed
    assert "speed probe of A.safetensors failed" in caplog.text


class FirstProbeSlow(ComfyClient):
    """A client that makes the first probe run pay `hang_s` extra, as CUDA's first use of the
    native size does on a real card."""

    def __init__(self, url: str, hang_s: float):
        super().__init__(url)
        self.hang_s = hang_s
        self.probes = 0

    async def submit(self, prompt_id: str, prompt: Mapping[str, Any], **kwargs: Any) -> Any:
        if prompt["4"]["inputs"]["width"] > 64:
            self.probes += 1
            if self.probes == 1:
                async with httpx.AsyncClient(base_url=self.base_url) as http:
                    await http.post("/emulator/faults", json={"hang_s": self.hang_s})
        return await super().submit(prompt_id, prompt, **kwargs)


async def test_the_probe_times_a_warm_run_not_the_first_at_the_native_size(
    emulator: Running,
) -> None:
    hang_s = 1.0
    client = FirstProbeSlow(emulator.url, hang_s)
    try:
        result = await warm_up(client, "A.safetensors", timeout_s=10, probe_steps=3)
    finally:
        await client.aclose()

    assert client.probes >= 2
    assert result.probe_s is not None
    assert result.probe_s < hang_s / 2


def card(factory: pytest.TempPathFactory, profile: str, checkpoint: str) -> Iterator[Running]:
    """An emulator of `profile` holding `checkpoint`, at the speed test's time scale."""
    extra = ("--profile", profile, "--checkpoints", checkpoint)
    with running_emulator(factory.mktemp(f"probe-{profile}"), *extra, time_scale=PROBE_SCALE) as e:
        yield e


def scaled_warm_s(profile: str, shape: JobShape) -> float:
    """What the cost model of `profile` charges a warm job of `shape`, scaled."""
    model = CostModel(load_profile(profile), LaunchFlags())
    return job_phases(model, shape, load_tier=None, first_job=False).total_s * PROBE_SCALE


@pytest.fixture(scope="module")
def rtx4070ti(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from card(tmp_path_factory, "rtx4070ti", SDXL)


def warm_s(steps: int) -> float:
    """What the cost model charges a warm SDXL job of `steps` steps at 1024x1024, scaled."""
    return scaled_warm_s("rtx4070ti", JobShape(SDXL, "sdxl", steps, 1024, 1024))


async def test_the_emulator_times_the_probe_as_a_warm_job_and_it_seeds_a_usable_speed(
    rtx4070ti: Running,
) -> None:
    client = ComfyClient(rtx4070ti.url)
    try:
        result = await warm_up(client, SDXL, timeout_s=10)
    finally:
        await client.aclose()
    assert result.probe is not None
    units, probe_s = result.probe

    assert units == pytest.approx(work_units(probe_prompt(SDXL, "sdxl")))
    # A busy machine only adds time (the emulator sleeps its cost): the bounds are lopsided,
    # and the upper one still tells a warm run from a cold one (about 3x a warm one).
    assert 0.85 * warm_s(10) <= probe_s <= 1.6 * warm_s(10)
    assert result.seconds > 2 * probe_s  # the cold warm-up: load, CUDA set-up
    twenty = work_units(probe_prompt(SDXL, "sdxl", steps=20))
    predicted_s = learned.seed(units, probe_s).predict_s(twenty)
    assert 0.8 * warm_s(20) <= predicted_s <= 1.6 * warm_s(20)


SD15 = "v1-5-pruned-emaonly.safetensors"


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from card(tmp_path_factory, "h200", SD15)


async def test_two_probe_sizes_tell_the_per_step_seconds_from_the_per_unit_ones(
    h200: Running,
) -> None:
    """An H200 runs SD1.5 at 512x512 bound by its per-step seconds (0.031 s a step against
    0.016 s of per-megapixel work): seeded from that one size, a 768x768 job of 30 steps was
    predicted 1.4x its time. The probe at half the side gives the line through both sizes."""
    client = ComfyClient(h200.url)
    try:
        result = await warm_up(client, SD15, timeout_s=10)
    finally:
        await client.aclose()
    assert len(result.probes) == 2
    (units, seconds), (small_units, small_s) = result.probes
    assert small_units == pytest.approx(units / 4)
    assert small_s < seconds

    true_s = scaled_warm_s("h200", JobShape(SD15, "sd15", 30, 768, 768))
    big = work_units(probe_prompt(SD15, "sd15", steps=30)) * (768 / 512) ** 2
    two = learned.seed_from_probes(result.probes)
    one = learned.seed_from_probes(result.probes[:1])
    assert two is not None and one is not None
    # A busy machine adds time to either probe, which tilts the line through the two both
    # ways; the short probe's share of it moves the prediction most (0.80x seen once at CI).
    assert 0.7 * true_s <= two.predict_s(big) <= 1.25 * true_s
    assert one.predict_s(big) > 1.3 * true_s  # what the single size believed
