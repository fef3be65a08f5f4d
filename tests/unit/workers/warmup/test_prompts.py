"""The warm-up prompt: valid for ComfyUI 0.3.64, tiny, never cached, out of the user's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workers.comfy.catalog import Catalog
from workers.comfy.folders import with_file_lists
from workers.comfy.validate import validate_prompt
from workers.comfy.workflow import work_units
from workers.warmup.prompts import (
    NODE_PHASES,
    PROBE_STEPS,
    SEED_LIMIT,
    Phase,
    WarmupResult,
    phase_seconds,
    probe_prompt,
    probe_seconds,
    probe_work_units,
    warmup_prompt,
)

OBJECT_INFO = Path(__file__).resolve().parents[4] / "workers/emulator/data/object_info.json"
CHECKPOINT = "sd_xl_base_1.0.safetensors"
FAMILIES = [None, "sd15", "sdxl", "flux", "a-family-nobody-knows"]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    """The recorded ComfyUI 0.3.64 catalogue, with our checkpoint in the loader's list."""
    return with_file_lists(Catalog.from_json_file(OBJECT_INFO), {"checkpoints": [CHECKPOINT]})


def by_class(prompt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["class_type"]: node["inputs"] for node in prompt.values()}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_warmup_prompt_is_valid_for_comfyui(catalog: Catalog, family: str | None) -> None:
    result = validate_prompt(warmup_prompt(CHECKPOINT, family), catalog)

    assert result.ok, result.response_body()
    assert result.node_errors == {}
    assert result.outputs == ["7"]


def test_the_validator_would_notice_a_checkpoint_the_worker_lacks(catalog: Catalog) -> None:
    result = validate_prompt(warmup_prompt("missing.safetensors"), catalog)

    assert not result.ok
    assert "1" in result.node_errors


def test_the_warmup_is_one_step_of_one_64px_image() -> None:
    nodes = by_class(warmup_prompt(CHECKPOINT, "sdxl"))

    assert nodes["CheckpointLoaderSimple"] == {"ckpt_name": CHECKPOINT}
    assert nodes["EmptyLatentImage"] == {"width": 64, "height": 64, "batch_size": 1}
    assert nodes["KSampler"]["steps"] == 1
    assert nodes["KSampler"]["denoise"] == 1.0


def test_the_image_goes_to_the_temp_folder_not_the_outputs() -> None:
    classes = [node["class_type"] for node in warmup_prompt(CHECKPOINT).values()]

    assert "PreviewImage" in classes
    assert "SaveImage" not in classes


def test_both_text_encoders_run() -> None:
    texts = [
        node["inputs"]["text"]
        for node in warmup_prompt(CHECKPOINT).values()
        if node["class_type"] == "CLIPTextEncode"
    ]

    assert len(texts) == 2
    assert len(set(texts)) == 2  # identical inputs could be served from one cache entry


def test_every_call_draws_a_fresh_seed() -> None:
    seeds = {by_class(warmup_prompt(CHECKPOINT))["KSampler"]["seed"] for _ in range(20)}

    assert len(seeds) == 20
    assert all(0 <= seed < SEED_LIMIT for seed in seeds)


def test_a_given_seed_is_used_and_the_prompt_is_otherwise_the_same() -> None:
    first = warmup_prompt(CHECKPOINT, "sdxl", seed=42)
    second = warmup_prompt(CHECKPOINT, "sdxl", seed=42)

    assert first == second
    assert by_class(first)["KSampler"]["seed"] == 42


@pytest.mark.parametrize("seed", [-1, SEED_LIMIT])
def test_a_seed_out_of_range_is_refused(seed: int) -> None:
    with pytest.raises(ValueError, match="seed"):
        warmup_prompt(CHECKPOINT, seed=seed)


@pytest.mark.parametrize(
    ("family", "cfg"),
    [(None, 7.0), ("sd15", 7.0), ("sdxl", 7.0), ("flux", 1.0), ("unknown", 7.0)],
)
def test_the_family_picks_the_cfg_its_jobs_use(family: str | None, cfg: float) -> None:
    assert by_class(warmup_prompt(CHECKPOINT, family))["KSampler"]["cfg"] == cfg


def test_every_node_has_a_phase() -> None:
    prompt = warmup_prompt(CHECKPOINT)

    assert set(NODE_PHASES) == set(prompt)
    assert NODE_PHASES["1"] is Phase.LOAD
    assert prompt["1"]["class_type"] == "CheckpointLoaderSimple"
    assert prompt["5"]["class_type"] == "KSampler"


@pytest.mark.parametrize(
    ("node_s", "phases"),
    [
        ({}, {}),
        ({"1": 0.9}, {Phase.LOAD: 0.9}),
        (
            {"1": 0.9, "2": 0.04, "3": 0.02, "4": 0.001, "5": 6.1, "6": 0.05, "7": 0.009},
            {
                Phase.LOAD: 0.9,
                Phase.ENCODE: 0.06,
                Phase.SAMPLE: 6.1,
                Phase.DECODE: 0.05,
                Phase.OTHER: 0.01,
            },
        ),
        ({"5": 1.0, "99": 0.5}, {Phase.SAMPLE: 1.0, Phase.OTHER: 0.5}),
    ],
)
def test_node_seconds_add_up_to_phases(
    node_s: dict[str, float], phases: dict[Phase, float]
) -> None:
    assert phase_seconds(node_s) == pytest.approx(phases)


def test_a_result_keeps_its_own_copy_of_the_phases() -> None:
    phases = {Phase.LOAD: 0.9, Phase.SAMPLE: 6.1}
    result = WarmupResult(CHECKPOINT, seconds=7.2, family="sdxl", phase_s=phases)
    phases[Phase.LOAD] = 99.0

    assert result.load_s == 0.9
    assert hash(result) == hash(WarmupResult(CHECKPOINT, 7.2, "sdxl", {Phase.LOAD: 1.0}))
    with pytest.raises(TypeError):
        result.phase_s[Phase.LOAD] = 1.0  # type: ignore[index]


def test_a_result_without_phases_has_no_load_time() -> None:
    assert WarmupResult(CHECKPOINT, seconds=7.2).load_s is None


@pytest.mark.parametrize(
    ("seconds", "phase_s", "probe_units", "probe_s"),
    [
        (-0.1, {}, None, None),
        (1.0, {Phase.LOAD: -0.5}, None, None),
        (1.0, {}, -2.6, 0.7),
        (1.0, {}, 2.6, -0.7),
    ],
)
def test_negative_times_are_refused(
    seconds: float, phase_s: dict[Phase, float], probe_units: float | None, probe_s: float | None
) -> None:
    with pytest.raises(ValueError, match="negative"):
        WarmupResult(CHECKPOINT, seconds, None, phase_s, probe_units, probe_s)


@pytest.mark.parametrize(("probe_units", "probe_s"), [(2.6, None), (None, 0.7)])
def test_a_probe_needs_both_its_units_and_its_seconds(
    probe_units: float | None, probe_s: float | None
) -> None:
    with pytest.raises(ValueError, match="both"):
        WarmupResult(CHECKPOINT, 1.0, probe_units=probe_units, probe_s=probe_s)


def test_a_result_tells_its_probe_if_it_ran() -> None:
    assert WarmupResult(CHECKPOINT, 1.0).probe is None
    assert WarmupResult(CHECKPOINT, 1.0, probe_units=2.6, probe_s=0.7).probe == (2.6, 0.7)


# -- the speed probe ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_the_probe_prompt_is_valid_for_comfyui(catalog: Catalog, family: str | None) -> None:
    result = validate_prompt(probe_prompt(CHECKPOINT, family), catalog)

    assert result.ok, result.response_body()
    assert result.outputs == ["7"]


@pytest.mark.parametrize(
    ("family", "side_px"),
    [
        ("sd15", 512),
        ("sdxl", 1024),
        ("sd3", 1024),
        ("flux", 1024),
        ("unknown", 512),
        ("a-family-nobody-knows", 512),
        (None, 512),
    ],
)
def test_the_probe_runs_the_familys_native_size(family: str | None, side_px: int) -> None:
    nodes = by_class(probe_prompt(CHECKPOINT, family))

    assert nodes["EmptyLatentImage"] == {"width": side_px, "height": side_px, "batch_size": 1}
    assert nodes["KSampler"]["steps"] == PROBE_STEPS == 10


def test_the_probe_is_the_warm_up_graph_with_its_own_size_steps_and_text() -> None:
    probe = probe_prompt(CHECKPOINT, "flux", steps=4, seed=7)
    warmup = warmup_prompt(CHECKPOINT, "flux", seed=7)

    assert set(probe) == set(warmup) == set(NODE_PHASES)
    assert {k: v["class_type"] for k, v in probe.items()} == {
        k: v["class_type"] for k, v in warmup.items()
    }
    assert probe["1"] == warmup["1"]  # the loader: cached after the warm-up
    assert probe["3"] == warmup["3"]  # the negative text: cached too, as for a warm job
    assert probe["2"]["inputs"]["text"] != warmup["2"]["inputs"]["text"]
    assert by_class(probe)["KSampler"]["steps"] == 4
    assert by_class(probe)["KSampler"]["cfg"] == 1.0


def test_every_probe_draws_a_fresh_seed() -> None:
    seeds = {by_class(probe_prompt(CHECKPOINT))["KSampler"]["seed"] for _ in range(20)}

    assert len(seeds) == 20


@pytest.mark.parametrize("steps", [0, -3])
def test_a_probe_without_steps_is_refused(steps: int) -> None:
    with pytest.raises(ValueError, match="at least one step"):
        probe_prompt(CHECKPOINT, steps=steps)


@pytest.mark.parametrize(
    ("family", "steps", "units"),
    [("sd15", 10, 2.62144), ("sdxl", 10, 10.48576), ("flux", 4, 4.194304), (None, 1, 0.262144)],
)
def test_the_probes_work_units_are_the_gateways_count(
    family: str | None, steps: int, units: float
) -> None:
    prompt = probe_prompt(CHECKPOINT, family, steps=steps)

    assert probe_work_units(family, steps) == pytest.approx(work_units(prompt))
    assert probe_work_units(family, steps) == pytest.approx(units)


def test_the_probes_seconds_leave_out_its_loader_only() -> None:
    node_s = {"1": 0.3, "2": 0.05, "4": 0.001, "5": 2.0, "6": 0.35, "7": 0.15}

    assert probe_seconds(node_s) == pytest.approx(2.551)
    assert probe_seconds({"1": 0.3}) == 0.0
