"""A ready worker's warm-up seeds its load and speed estimates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import MappingProxyType

import pytest

from gateway.dispatch.links import Links, WorkerLink
from gateway.learning import speed as learned
from gateway.learning.learn import probed
from gateway.recovery.lifecycle import Supervision
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec
from workers.warmup.prompts import Phase, WarmupResult

SDXL = "sd_xl_base_1.0.safetensors"
PONY = "ponyDiffusionV6.safetensors"
SD15 = "v1-5-pruned-emaonly.safetensors"
SDXL_UNITS = 10.48576  # the probe: 10 steps of 1024x1024


async def nothing() -> None:
    return None


def warmed(checkpoint: str, probe: tuple[float, float] | None) -> WarmupResult:
    units, probe_s = probe if probe is not None else (None, None)
    return WarmupResult(checkpoint, 9.0, None, {Phase.LOAD: 2.0}, units, probe_s)


@pytest.fixture
async def link() -> AsyncIterator[WorkerLink]:
    handle = WorkerHandle(WorkerSpec("w"), "http://127.0.0.1:9", ready=True)
    link = WorkerLink(handle, ComfyClient(handle.url), sid="s")
    yield link
    await link.client.aclose()


def seeding() -> Supervision:
    return Supervision(Links([]), None, None, nothing)  # type: ignore[arg-type]


def test_a_probe_seeds_its_familys_speed_next_to_the_load(link: WorkerLink) -> None:
    seeding().seed(link, (warmed(SDXL, (SDXL_UNITS, 2.6)),))

    assert set(link.speed_book) == {"sdxl"}
    assert link.speed_book["sdxl"] == learned.seed(SDXL_UNITS, 2.6)
    assert link.speed_book["sdxl"].predict_s(SDXL_UNITS) == pytest.approx(2.6)
    assert link.load_s == {SDXL: 2.0, "sdxl": 2.0}
    assert link.resident == (SDXL,)


def test_a_probe_is_one_more_observation_of_a_known_estimate(link: WorkerLink) -> None:
    restored = learned.observe(learned.seed(5.0, 2.0), 5.0, 2.1)
    other = learned.seed(2.6, 0.5)
    link.speed_book = MappingProxyType({"sdxl": restored, "sd15": other})

    seeding().seed(link, (warmed(SDXL, (SDXL_UNITS, 4.0)),))

    assert link.speed_book["sdxl"] == learned.observe(restored, SDXL_UNITS, 4.0)
    assert link.speed_book["sdxl"].observations == restored.observations + 1
    assert link.speed_book["sd15"] is other


def test_a_second_checkpoint_of_the_family_is_observed_not_seeded_again(link: WorkerLink) -> None:
    seeding().seed(link, (warmed(SDXL, (SDXL_UNITS, 2.6)), warmed(PONY, (SDXL_UNITS, 3.0))))

    first = learned.seed(SDXL_UNITS, 2.6)
    assert link.speed_book == {"sdxl": learned.observe(first, SDXL_UNITS, 3.0)}


@pytest.mark.parametrize(
    "result",
    [
        warmed(SDXL, None),  # no probe (disabled, or it failed)
        warmed(SDXL, (SDXL_UNITS, 0.0)),  # timed as nothing: no speed to learn
        warmed(SDXL, (0.0, 2.6)),
    ],
)
def test_a_warm_up_without_a_usable_probe_leaves_the_speeds_alone(result: WarmupResult) -> None:
    book = MappingProxyType({"sd15": learned.seed(2.6, 0.5)})

    assert probed(book, result) is book


def test_the_probe_is_learned_under_the_family_of_the_checkpoint_name() -> None:
    result = WarmupResult(SD15, 5.0, "sdxl", probe_units=2.62144, probe_s=0.7)

    assert set(probed({}, result)) == {"sd15"}


def test_probes_at_two_sizes_seed_the_fixed_and_the_per_unit_seconds(link: WorkerLink) -> None:
    def card_s(units: float) -> float:
        return 0.5 + 0.1 * units  # a card paying 0.5 s whatever the size

    units = SDXL_UNITS
    result = WarmupResult(
        SDXL, 9.0, None, {Phase.LOAD: 2.0}, units, card_s(units), units / 4, card_s(units / 4)
    )
    seeding().seed(link, (result,))
    estimate = link.speed_book["sdxl"]
    assert estimate.fixed_s == pytest.approx(0.5)
    assert estimate.predict_s(4 * units) == pytest.approx(card_s(4 * units))
