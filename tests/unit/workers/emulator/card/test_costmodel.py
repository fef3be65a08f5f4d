"""The cost model against the calibration figures, and the profile loader."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from workers.comfy.families import family_of
from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import CostModel, JobShape, LoadTier, flag_settings, job_phases
from workers.emulator.card.profiles import (
    ProfileError,
    cost_family,
    load_profile,
    profile_from_dict,
    profile_names,
)
from workers.emulator.card.residency import Residency

SD15 = JobShape("A.safetensors", "sd15", 20, 512, 512)
SDXL = JobShape("X.safetensors", "sdxl", 20, 1024, 1024)
DISK, PAGE, RAM = LoadTier.DISK, LoadTier.PAGE_CACHE, LoadTier.RAM


def cost(profile: str = "h200", *args: str) -> CostModel:
    return CostModel(load_profile(profile), LaunchFlags.parse(args))


def total_s(
    model: CostModel, job: JobShape, tier: LoadTier | None, *, first: bool = False
) -> float:
    return job_phases(model, job, load_tier=tier, first_job=first).total_s


def assert_near(emulated: float, low: float, high: float | None = None) -> None:
    reference = (low + (low if high is None else high)) / 2
    assert abs(emulated / reference - 1) <= 0.25, f"{emulated:.3f} vs {reference:.3f}"


# h200 and h200-pair: medians of bench/data/real_gpu (two instances on one H200, 2026-12-01;
# `python -m bench.calibration` compares every group); h200-shared: calibration/README.md
# (the other card of the host busy).
CALIBRATION = [
    ("SD1.5 first job ever (no preload)", "h200", SD15, DISK, True, 4.1, 4.1),
    ("SD1.5 warm", "h200", SD15, None, False, 0.98, 0.98),
    ("SD1.5 -> other SD1.5, page cache", "h200", SD15, PAGE, False, 2.01, 2.01),
    ("SDXL first load on a warm instance", "h200", SDXL, DISK, False, 4.28, 4.28),
    ("SDXL warm", "h200", SDXL, None, False, 1.95, 1.95),
    ("SD1.5 -> SDXL", "h200", SDXL, PAGE, False, 3.71, 3.71),
    ("SD1.5 warm, the card's other instance busy", "h200-pair", SD15, None, False, 1.41, 1.41),
    ("SD1.5 load, the other instance busy", "h200-pair", SD15, DISK, False, 3.91, 3.91),
    ("SDXL warm, the other instance busy", "h200-pair", SDXL, None, False, 2.38, 2.38),
    ("SDXL load, the other instance busy", "h200-pair", SDXL, DISK, False, 5.81, 5.81),
    ("SD1.5 warm, both cards busy", "h200-shared", SD15, None, False, 1.2, 1.6),
    ("SD1.5 -> other SD1.5, both busy", "h200-shared", SD15, PAGE, False, 5.9, 6.7),
    ("SDXL switch, both busy (flags file)", "h200-shared", SDXL, DISK, False, 11.7, 13.2),
]


@pytest.mark.parametrize(
    ("what", "profile", "job", "tier", "first", "low", "high"),
    CALIBRATION,
    ids=[row[0] for row in CALIBRATION],
)
def test_job_totals_match_the_calibration_within_25_percent(
    what: str,
    profile: str,
    job: JobShape,
    tier: LoadTier | None,
    first: bool,
    low: float,
    high: float,
) -> None:
    assert_near(total_s(cost(profile), job, tier, first=first), low, high)


@pytest.mark.parametrize(
    ("profile", "job", "tier", "low", "high"),
    [
        ("h200", SDXL, DISK, 1.72, 1.72),
        ("h200", SDXL, PAGE, 1.64, 1.64),
        ("h200", SD15, PAGE, 0.60, 0.60),
        ("h200-pair", SD15, DISK, 2.30, 2.30),
        ("h200-pair", SDXL, DISK, 3.03, 3.03),
        ("h200-shared", SD15, PAGE, 4.0, 4.8),
        ("h200-shared", SDXL, DISK, 8.1, 9.3),
    ],
)
def test_load_phase_matches_the_calibration(
    profile: str, job: JobShape, tier: LoadTier, low: float, high: float
) -> None:
    phases = job_phases(cost(profile), job, load_tier=tier, first_job=False)
    assert_near(phases.load_s, low, high)


def test_startup_and_identical_prompt_match_the_calibration() -> None:
    model = cost()
    assert_near(model.startup_s(), 14.3, 16.3)
    assert_near(model.cached_prompt_s(), 0.05)


def test_a_checkpoint_swap_costs_several_warm_jobs_on_h200() -> None:
    model = cost()
    swap_s = total_s(model, SDXL, PAGE) - total_s(model, SDXL, None)
    assert 0.8 <= swap_s / total_s(model, SD15, None) <= 4.0


def test_load_bandwidth_is_a_profile_parameter() -> None:
    fast = job_phases(cost("h200"), SD15, load_tier=PAGE, first_job=False).load_s
    slow = job_phases(cost("h200-shared"), SD15, load_tier=PAGE, first_job=False).load_s
    assert slow / fast > 5


# Ratios variant / default of the launch-flag table (calibration/README.md).
FLAG_RATIOS = [
    ("--use-split-cross-attention", SDXL, 1.8),
    ("--use-split-cross-attention", SD15, 1.18),
    ("--use-quad-cross-attention", SD15, 1.3),
    ("--use-quad-cross-attention", SDXL, 1.1),
    ("--lowvram", SD15, 2.4),
    ("--novram", SD15, 5.4),
    ("--novram", SDXL, 6.3),
    ("--fp32-vae", SD15, 1.0),
    ("--fp32-vae", SDXL, 1.0),
    ("--cache-lru 8", SD15, 1.0),
]


@pytest.mark.parametrize("profile", ["h200", "h200-shared"])
@pytest.mark.parametrize(("flag", "job", "ratio"), FLAG_RATIOS)
def test_warm_job_flag_effects_follow_the_measured_ratios(
    profile: str, flag: str, job: JobShape, ratio: float
) -> None:
    variant = total_s(cost(profile, *flag.split()), job, None)
    assert_near(variant / total_s(cost(profile), job, None), ratio)


def switch_back_s(model: CostModel) -> float:
    """SD1.5, SDXL, then SD1.5 again on one instance: the last job's total."""
    residency = Residency(model.profile, model.flags)
    residency.touch(SD15.checkpoint, SD15.family)
    residency.touch(SDXL.checkpoint, SDXL.family)
    return total_s(model, SD15, residency.touch(SD15.checkpoint, SD15.family))


def test_cache_lru_makes_the_switch_back_about_3x_faster_on_the_measured_machine() -> None:
    default_s = switch_back_s(cost("h200-shared"))
    lru_s = switch_back_s(cost("h200-shared", "--cache-lru", "8"))
    assert_near(default_s, 5.85)
    assert_near(lru_s, 1.75)
    assert_near(default_s / lru_s, 3.3)


def test_flag_effects_multiply_across_groups() -> None:
    base = cost("rtx4070ti")
    both = cost("rtx4070ti", "--lowvram", "--use-quad-cross-attention")
    low = cost("rtx4070ti", "--lowvram")
    quad = cost("rtx4070ti", "--use-quad-cross-attention")
    step = [m.sample_step_s("sdxl", 1.0, 1) for m in (base, low, quad, both)]
    assert step[3] == pytest.approx(step[1] * step[2] / step[0])


RTX_SEEDS = [
    ((), 13.4, 4.6),
    (("--fp16-vae",), 13.4, 4.6),
    (("--lowvram", "--use-quad-cross-attention", "--fp32-vae"), 41.6, 14.8),
]


@pytest.mark.parametrize(("args", "first_s", "second_s"), RTX_SEEDS)
def test_rtx4070ti_sdxl_first_and_second_frame_match_the_seed_figures(
    args: tuple[str, ...], first_s: float, second_s: float
) -> None:
    model = cost("rtx4070ti", *args)
    first = job_phases(model, SDXL, load_tier=DISK, first_job=True)
    second = job_phases(model, SDXL, load_tier=None, first_job=False, encode_cached=True)
    assert_near(first.total_s, first_s)
    assert_near(second.total_s, second_s)


def test_rtx4070ti_is_several_times_slower_than_h200() -> None:
    assert total_s(cost("rtx4070ti"), SDXL, None) / total_s(cost("h200"), SDXL, None) > 2


# ---- job_phases: where each cost lands ----


def test_a_resident_job_has_no_load_phase() -> None:
    phases = job_phases(cost(), SD15, load_tier=None, first_job=False)
    assert phases.load_s == 0
    assert phases.total_s == pytest.approx(
        phases.encode_s + phases.sample_s + phases.decode_s + phases.other_s
    )


def test_a_load_reads_in_the_loader_and_copies_to_vram_in_the_sampler() -> None:
    model = cost()
    warm = job_phases(model, SDXL, load_tier=None, first_job=False)
    loaded = job_phases(model, SDXL, load_tier=PAGE, first_job=False)
    assert loaded.load_s == pytest.approx(model.read_s("sdxl", PAGE))
    assert loaded.sample_s - warm.sample_s == pytest.approx(model.upload_s("sdxl"))
    assert model.load_s("sdxl", PAGE) == pytest.approx(
        model.read_s("sdxl", PAGE) + model.upload_s("sdxl")
    )


def test_load_tiers_are_ordered_disk_page_cache_ram() -> None:
    model = cost()
    loads = [model.load_s("sdxl", tier) for tier in (DISK, PAGE, RAM)]
    assert loads[0] > loads[1] > loads[2] > 0
    assert model.read_s("sdxl", RAM) == 0


def test_the_first_job_penalty_lands_in_the_sampler() -> None:
    model = cost()
    later = job_phases(model, SD15, load_tier=DISK, first_job=False)
    first = job_phases(model, SD15, load_tier=DISK, first_job=True)
    assert first.sample_s - later.sample_s == pytest.approx(model.first_job_penalty_s())


@pytest.mark.parametrize(
    ("tier", "first", "cached", "encodes", "expected"),
    [
        (None, False, False, None, 1),
        (PAGE, False, False, None, 2),
        (None, True, False, None, 2),
        (None, False, True, None, 0),
        (PAGE, False, False, 3, 3),
    ],
)
def test_text_encodes_follow_what_the_node_cache_kept(
    tier: LoadTier | None, first: bool, cached: bool, encodes: int | None, expected: int
) -> None:
    model = cost()
    phases = job_phases(
        model, SD15, load_tier=tier, first_job=first, encode_cached=cached, encodes=encodes
    )
    assert phases.encode_s == pytest.approx(expected * model.clip_encode_s("sd15"))


def test_sampling_scales_with_steps_and_megapixels_and_batch() -> None:
    model = cost()
    base = job_phases(model, SDXL, load_tier=None, first_job=False)
    double_steps = JobShape("X", "sdxl", 40, 1024, 1024)
    batch4 = JobShape("X", "sdxl", 20, 1024, 1024, batch=4)
    assert job_phases(model, double_steps, load_tier=None, first_job=False).sample_s == (
        pytest.approx(2 * base.sample_s)
    )
    bigger = job_phases(model, batch4, load_tier=None, first_job=False)
    assert 3 * base.sample_s < bigger.sample_s < 4 * base.sample_s
    assert bigger.decode_s == pytest.approx(4 * base.decode_s)


def test_unknown_family_costs_as_the_default_family() -> None:
    model = cost()
    assert model.sample_step_s("flux-ish", 1.0, 1) == model.sample_step_s("sd15", 1.0, 1)


@pytest.mark.parametrize(
    ("args", "settings"),
    [
        ([], ()),
        (["--lowvram"], ("vram:low",)),
        (["--cpu"], ("cpu",)),
        (
            ["--use-quad-cross-attention", "--fp32-vae", "--cpu-vae", "--preview-method", "taesd"],
            ("attention:quad", "vae:fp32", "cpu_vae", "preview:taesd"),
        ),
        (["--cache-lru", "8", "--highvram"], ("vram:high",)),
    ],
)
def test_flag_settings_name_the_profile_keys(args: list[str], settings: tuple[str, ...]) -> None:
    assert flag_settings(LaunchFlags.parse(args)) == settings


def test_cpu_mode_is_far_slower() -> None:
    assert total_s(cost("h200", "--cpu"), SD15, None) > 20 * total_s(cost(), SD15, None)


# ---- profiles ----


def test_the_shipped_profiles_load() -> None:
    names = profile_names()
    assert {"h200", "h200-shared", "rtx4070ti"} <= set(names)
    for name in names:
        profile = load_profile(name)
        assert profile.name == name
        assert {"sd15", "sdxl"} <= set(profile.families)


def test_profiles_report_their_card() -> None:
    h200, rtx = load_profile("h200"), load_profile("rtx4070ti")
    assert h200.device_name == "cuda:0 NVIDIA H200 : cudaMallocAsync"
    assert 140_000 < h200.vram_total_mib < 145_000
    assert 12_000 < rtx.vram_total_mib < 12_300


@pytest.mark.parametrize(
    ("ckpt", "family"),
    [
        ("sd_xl_base_1.0.safetensors", "sdxl"),
        ("juggernautXL_v9.safetensors", "sdxl"),
        ("ponyDiffusionV6.safetensors", "sdxl"),
        ("v1-5-pruned-emaonly.safetensors", "sd15"),
        ("A.safetensors", "sd15"),
        ("subdir/SDXL-turbo.safetensors", "sdxl"),
    ],
)
def test_the_cost_family_comes_from_the_checkpoint_name(ckpt: str, family: str) -> None:
    assert cost_family(ckpt, load_profile("h200")) == family


@pytest.mark.parametrize(
    "ckpt",
    [
        "illustriousMix_v10.safetensors",
        "flux1-dev.safetensors",
        "sd3_medium.safetensors",
        "juggernautXL_v9.safetensors",
        "v1-5-pruned-emaonly.safetensors",
    ],
)
def test_the_emulator_charges_the_family_the_gateway_learns_under(ckpt: str) -> None:
    data = shipped_json("h200")
    families = dict(data["families"])  # type: ignore[call-overload]
    families.update(flux=families["sdxl"], sd3=families["sdxl"])
    profile = profile_from_dict({**data, "families": families})

    assert cost_family(ckpt, profile) == family_of(ckpt)


def test_a_family_the_profile_does_not_price_costs_as_sd15() -> None:
    assert cost_family("flux1-dev.safetensors", load_profile("h200")) == "sd15"


def shipped_json(name: str) -> dict[str, object]:
    text = resources.files("workers.emulator").joinpath("profiles", f"{name}.json").read_text()
    data: dict[str, object] = json.loads(text)
    return data


def test_a_profile_loads_from_a_json_path(tmp_path: Path) -> None:
    data = shipped_json("h200")
    data["name"] = "mine"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    assert load_profile(str(path)).name == "mine"


def broken(**changes: object) -> dict[str, object]:
    data = shipped_json("h200")
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (broken(startup_s=None), "missing field 'startup_s'"),
        (broken(families=None), "missing field 'families'"),
        (broken(startup_s="fast"), "expected a non-negative number"),
        (broken(startup_s=-1), "expected a non-negative number"),
        (broken(previews="yes"), "expected bool"),
        (broken(speed=3), "unknown field"),
        (broken(load_ram_mib_s=0), "must be positive"),
        (broken(families={"sdxl": {}}), "default family 'sd15'"),
        (broken(family_patterns={"xl": "sdxl"}), "unknown field"),
        (broken(flag_effects={"vram:low": {"*": {"sample_x": "2"}}}), "vram:low"),
        ([], "expected an object"),
    ],
)
def test_bad_profiles_are_refused_with_the_reason(data: object, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        profile_from_dict(data)


def test_unknown_profile_names_list_the_known_ones() -> None:
    with pytest.raises(ProfileError, match=r"unknown profile 'a100'.*h200"):
        load_profile("a100")


def test_bad_json_is_a_profile_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(str(path))


def test_a_missing_family_field_names_the_family(tmp_path: Path) -> None:
    data = broken()
    families = data["families"]
    assert isinstance(families, dict)
    del families["sdxl"]["clip_encode_s"]
    with pytest.raises(ProfileError, match=r"families\.sdxl: missing field 'clip_encode_s'"):
        profile_from_dict(data)


def test_profiles_and_cost_models_are_hashable_values() -> None:
    assert hash(cost()) == hash(cost())
    assert cost() == cost()
