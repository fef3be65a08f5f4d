"""ComfyUI launch args: exclusive groups, the gateway's own flags, defaults chosen per card."""

from __future__ import annotations

import re

import pytest

from workers.comfy.flags import Attention, CacheMode, LaunchFlags, VramMode
from workers.comfy.launch_args import (
    GATEWAY_OWNED_FLAGS,
    FlagError,
    check_args,
    checkpoints_fitting,
    checkpoints_kept,
    lru_size_keeping,
    plan_launch,
)
from workers.emulator.card.profiles import load_profile
from workers.emulator.card.residency import Residency

H200_MIB = 143156
RTX4090_MIB = 24564
RTX4070TI_MIB = 12282

EXCLUSIVE = [
    (["--lowvram", "--highvram"], "--highvram: not allowed with argument --lowvram (vram group)"),
    (["--novram", "--gpu-only"], "vram group"),
    (["--cpu", "--lowvram"], "vram group"),
    (["--use-split-cross-attention", "--use-sage-attention"], "attention group"),
    (["--use-quad-cross-attention", "--use-pytorch-cross-attention"], "attention group"),
    (["--fp16-vae", "--bf16-vae"], "vae dtype group"),
    (["--fp32-vae", "--fp16-vae"], "vae dtype group"),
    (["--cache-lru", "8", "--cache-none"], "cache group"),
    (["--cache-classic", "--cache-lru=4"], "cache group"),
]


@pytest.mark.parametrize(("args", "message"), EXCLUSIVE)
def test_exclusive_comfyui_flags_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(FlagError, match=re.escape(message)):
        check_args(args)


OWNED = [
    (["--port", "8188"], "--port"),
    (["--listen"], "--listen"),
    (["--listen", "0.0.0.0"], "--listen"),
    (["--output-directory", "/out"], "--output-directory"),
    (["--temp-directory=/tmp/x"], "--temp-directory"),
    (["--input-directory", "/in"], "--input-directory"),
    (["--cuda-device", "1"], "--cuda-device"),
    (["--highvram", "--port=9000"], "--port"),
    (["--outp", "/out"], "--outp"),  # argparse would expand it to --output-directory
    (["--cuda-dev", "0"], "--cuda-dev"),
    (["--port", "1", "--listen", "x"], "--port, --listen: the gateway sets these"),
]


@pytest.mark.parametrize(("args", "named"), OWNED)
def test_flags_the_gateway_sets_are_refused(args: list[str], named: str) -> None:
    with pytest.raises(FlagError, match=named) as caught:
        check_args(args)

    assert "the gateway sets" in str(caught.value)
    assert "from the worker's args" in str(caught.value)


ACCEPTED = [
    ([], LaunchFlags()),
    (["--highvram", "--use-sage-attention"], LaunchFlags(VramMode.HIGH, Attention.SAGE)),
    (["--lowvram", "--lowvram"], LaunchFlags(vram_mode=VramMode.LOW)),
    (["--cuda-malloc", "--preview-method", "auto"], LaunchFlags(preview_method="auto")),
    (["--reserve-vram", "1.5", "--fast"], LaunchFlags()),  # flags with no cost effect
    (["--cache-lru", "4"], LaunchFlags(cache_mode=CacheMode.LRU, cache_lru_size=4)),
]


@pytest.mark.parametrize(("args", "flags"), ACCEPTED)
def test_compatible_flags_are_accepted(args: list[str], flags: LaunchFlags) -> None:
    assert check_args(args) == flags


def test_every_gateway_flag_is_refused_by_its_full_name() -> None:
    for flag in GATEWAY_OWNED_FLAGS:
        with pytest.raises(FlagError, match=flag):
            check_args([flag, "x"])


def test_a_positional_argument_is_refused() -> None:
    with pytest.raises(FlagError, match="positional"):
        check_args(["main.py", "--lowvram"])


@pytest.mark.parametrize(
    ("vram_total_mib", "fit"),
    [
        (H200_MIB, 21),
        (81920, 11),
        (RTX4090_MIB, 3),
        (16376, 2),
        (RTX4070TI_MIB, 1),
        (8192, 0),
        (2000, 0),
    ],
)
def test_checkpoints_fitting_counts_sdxl_checkpoints_beside_the_reserve(
    vram_total_mib: float, fit: int
) -> None:
    assert checkpoints_fitting(vram_total_mib) == fit


PLANS = [
    # (user args, VRAM MiB, final args, words in the cache reason)
    ([], H200_MIB, ("--cache-lru", "22"), "--cache-lru 22 added: 21 SDXL-size checkpoints"),
    ([], 32607, ("--cache-lru", "22"), "22 node results keep 4 checkpoints"),
    ([], RTX4090_MIB, ("--cache-lru", "10"), "--cache-lru 10 added: 3 SDXL-size"),
    ([], 16376, ("--cache-lru", "10"), "10 node results keep 2 checkpoints"),
    ([], RTX4070TI_MIB, (), "classic cache kept: 1 SDXL-size checkpoint(s) fit in 12282 MiB"),
    ([], None, (), "classic cache kept (the card's VRAM is unknown)"),
    (["--cache-none"], H200_MIB, ("--cache-none",), "--cache-none kept as given"),
    (["--cache-classic"], H200_MIB, ("--cache-classic",), "--cache-classic kept as given"),
    (["--cache-lru", "2"], H200_MIB, ("--cache-lru", "2"), "--cache-lru kept as given"),
    (["--cache-lru=0"], H200_MIB, ("--cache-lru=0",), "--cache-lru kept as given"),
    (
        ["--use-sage-attention"],
        H200_MIB,
        ("--use-sage-attention", "--cache-lru", "22"),
        "--cache-lru 22 added",
    ),
]


@pytest.mark.parametrize(("args", "vram_total_mib", "final", "reason"), PLANS)
def test_the_plan_adds_an_lru_cache_where_several_models_fit(
    args: list[str], vram_total_mib: float | None, final: tuple[str, ...], reason: str
) -> None:
    plan = plan_launch(args, vram_total_mib)

    assert plan.args == final
    assert plan.flags == LaunchFlags.parse(final)
    assert reason in plan.reasons[0]
    assert plan.reasons[0].startswith("cache: ")


@pytest.mark.parametrize("vram_total_mib", [H200_MIB, RTX4090_MIB, RTX4070TI_MIB, 4096, None])
def test_the_plan_never_adds_a_vram_flag(vram_total_mib: float | None) -> None:
    plan = plan_launch([], vram_total_mib)

    assert plan.flags.vram_mode is VramMode.NORMAL
    assert not {"--lowvram", "--novram", "--highvram", "--gpu-only"} & set(plan.args)


VRAM_NOTES = [
    (["--lowvram"], H200_MIB, ["vram: --lowvram kept as given", "2.4x slower"]),
    (["--novram"], RTX4090_MIB, ["vram: --novram kept as given", "5.4x slower"]),
    (["--lowvram"], RTX4070TI_MIB, []),
    (["--lowvram"], None, []),
    (["--highvram"], H200_MIB, []),
    ([], H200_MIB, []),
]


@pytest.mark.parametrize(("args", "vram_total_mib", "words"), VRAM_NOTES)
def test_a_low_vram_flag_on_a_big_card_is_kept_with_a_warning(
    args: list[str], vram_total_mib: float | None, words: list[str]
) -> None:
    plan = plan_launch(args, vram_total_mib)
    notes = [reason for reason in plan.reasons if reason.startswith("vram:")]

    assert plan.args[: len(args)] == tuple(args)
    if not words:
        assert notes == []
    else:
        assert len(notes) == 1
        assert all(word in notes[0] for word in words)


def test_the_plan_refuses_what_check_args_refuses() -> None:
    with pytest.raises(FlagError, match="vram group"):
        plan_launch(["--lowvram", "--highvram"], H200_MIB)
    with pytest.raises(FlagError, match="--port"):
        plan_launch(["--port", "1"], H200_MIB)


def kept_in_turn(lru_size: int) -> int:
    """Checkpoints the emulated node cache keeps when txt2img prompts take turns over them:
    no reload after the first round."""
    kept = 1
    for k in range(2, 12):
        residency = Residency(
            load_profile("h200"), LaunchFlags.parse(["--cache-lru", str(lru_size)])
        )
        loads = [residency.touch(f"c{i % k}.safetensors", "sd15") for i in range(3 * k)]
        if all(tier is None for tier in loads[k:]):
            kept = k
    return kept


def test_checkpoints_kept_is_what_the_emulated_node_cache_keeps_in_turn() -> None:
    """The gateway's count against the emulator's ComfyUI node cache (the latter checked on an
    H200, tests/unit/workers/emulator/card/test_residency.py), and the size the gateway adds to keep
    K."""
    for lru_size in range(1, 60):
        kept = checkpoints_kept(lru_size)
        assert kept == kept_in_turn(lru_size), lru_size
        assert lru_size < lru_size_keeping(kept + 1)
        assert lru_size >= lru_size_keeping(kept) or kept == 1
