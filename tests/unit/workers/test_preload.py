"""The warm-up run against a real emulator process: cold timings by phase, clear failures."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.unit.emulator.running import Running, running_emulator
from workers.client import ComfyClient
from workers.preload import WarmupError, guess_family, warm_up
from workers.warmup import Phase


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


def test_only_guidance_distilled_families_change_the_warm_up() -> None:
    assert guess_family("flux1-dev-fp8.safetensors") == "flux"
    assert guess_family("sd_xl_base_1.0.safetensors") is None
