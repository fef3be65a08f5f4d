"""LaunchFlags: ComfyUI 0.3.64's cost-relevant flags, its exclusive groups, unrelated flags."""

from __future__ import annotations

import pytest

from workers.comfy.flags import (
    Attention,
    CacheMode,
    FlagError,
    LaunchFlags,
    VaeDtype,
    VramMode,
)

PARSED = [
    ([], LaunchFlags()),
    (["--lowvram"], LaunchFlags(vram_mode=VramMode.LOW)),
    (["--novram"], LaunchFlags(vram_mode=VramMode.NO)),
    (["--highvram"], LaunchFlags(vram_mode=VramMode.HIGH)),
    (["--gpu-only"], LaunchFlags(vram_mode=VramMode.GPU_ONLY)),
    (["--normalvram"], LaunchFlags()),
    (["--cpu"], LaunchFlags(cpu=True)),
    (["--use-split-cross-attention"], LaunchFlags(attention=Attention.SPLIT)),
    (["--use-quad-cross-attention"], LaunchFlags(attention=Attention.QUAD)),
    (["--use-pytorch-cross-attention"], LaunchFlags()),
    (["--use-sage-attention"], LaunchFlags(attention=Attention.SAGE)),
    (["--fp16-vae"], LaunchFlags(vae_dtype=VaeDtype.FP16)),
    (["--bf16-vae"], LaunchFlags(vae_dtype=VaeDtype.BF16)),
    (["--fp32-vae"], LaunchFlags(vae_dtype=VaeDtype.FP32)),
    (["--cpu-vae"], LaunchFlags(cpu_vae=True)),
    (["--fp32-vae", "--cpu-vae"], LaunchFlags(vae_dtype=VaeDtype.FP32, cpu_vae=True)),
    (["--cache-classic"], LaunchFlags()),
    (["--cache-none"], LaunchFlags(cache_mode=CacheMode.NONE)),
    (["--cache-lru", "8"], LaunchFlags(cache_mode=CacheMode.LRU, cache_lru_size=8)),
    (["--cache-lru=3"], LaunchFlags(cache_mode=CacheMode.LRU, cache_lru_size=3)),
    (["--cache-lru", "0"], LaunchFlags(cache_lru_size=0)),
    (["--preview-method", "taesd"], LaunchFlags(preview_method="taesd")),
    (["--lowvram", "--lowvram"], LaunchFlags(vram_mode=VramMode.LOW)),
    (
        ["--lowvram", "--use-quad-cross-attention", "--fp32-vae", "--cache-lru", "2"],
        LaunchFlags(
            vram_mode=VramMode.LOW,
            attention=Attention.QUAD,
            vae_dtype=VaeDtype.FP32,
            cache_mode=CacheMode.LRU,
            cache_lru_size=2,
        ),
    ),
]


@pytest.mark.parametrize(("args", "expected"), PARSED)
def test_parse_reads_each_cost_relevant_flag(args: list[str], expected: LaunchFlags) -> None:
    assert LaunchFlags.parse(args) == expected


UNRELATED = [
    ["--listen", "127.0.0.1", "--port", "8188", "--lowvram"],
    ["--listen", "--lowvram"],
    ["--lowvram", "--listen"],
    ["--port=9000", "--lowvram", "--output-directory", "/tmp/out"],
    ["--front-end-root", "/srv/empty", "--disable-auto-launch", "--lowvram"],
    ["--extra-model-paths-config", "a.yaml", "b.yaml", "--lowvram", "--verbose"],
    ["--reserve-vram", "1.5", "--lowvram", "--fast", "fp16_accumulation", "--database-url", "x"],
    ["--lowvram", "--cuda-device", "1", "--disable-xformers", "--force-upcast-attention"],
]


@pytest.mark.parametrize("args", UNRELATED)
def test_parse_skips_unrelated_flags_and_their_values(args: list[str]) -> None:
    assert LaunchFlags.parse(args) == LaunchFlags(vram_mode=VramMode.LOW)


EXCLUSIVE = [
    (["--lowvram", "--novram"], "vram"),
    (["--highvram", "--gpu-only"], "vram"),
    (["--cpu", "--lowvram"], "vram"),
    (["--normalvram", "--novram"], "vram"),
    (["--use-split-cross-attention", "--use-quad-cross-attention"], "attention"),
    (["--use-pytorch-cross-attention", "--use-sage-attention"], "attention"),
    (["--fp16-vae", "--fp32-vae"], "vae dtype"),
    (["--bf16-vae", "--fp16-vae"], "vae dtype"),
    (["--cache-lru", "4", "--cache-none"], "cache"),
    (["--cache-classic", "--cache-lru", "4"], "cache"),
    (["--cache-none", "--cache-classic"], "cache"),
]


@pytest.mark.parametrize(("args", "group"), EXCLUSIVE)
def test_parse_refuses_flags_of_one_exclusive_group(args: list[str], group: str) -> None:
    with pytest.raises(FlagError, match="not allowed with") as caught:
        LaunchFlags.parse(args)
    message = str(caught.value)
    assert group in message
    named = [a for a in args if a.startswith("--")]
    assert all(flag in message for flag in named)


BAD = [
    (["--cache-lru", "x"], "invalid int value 'x'"),
    (["--cache-lru", "-1"], "must be >= 0"),
    (["--cache-lru"], "expected one argument"),
    (["--cache-lru", "2", "3"], "expected one argument"),
    (["--preview-method", "fancy"], "invalid choice 'fancy'"),
    (["--lowvram", "yes"], "takes no value"),
    (["main.py", "--lowvram"], "unexpected argument 'main.py'"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_parse_refuses_bad_values_with_a_clear_message(args: list[str], message: str) -> None:
    with pytest.raises(FlagError, match=message):
        LaunchFlags.parse(args)


def test_flag_error_is_a_value_error() -> None:
    assert issubclass(FlagError, ValueError)


@pytest.mark.parametrize(("args", "expected"), PARSED)
def test_args_round_trip_through_parse(args: list[str], expected: LaunchFlags) -> None:
    assert LaunchFlags.parse(expected.args()) == expected


CANONICAL = [
    ([], []),
    (["--normalvram", "--use-pytorch-cross-attention", "--cache-classic"], []),
    (["--cache-lru", "8", "--lowvram"], ["--lowvram", "--cache-lru", "8"]),
    (
        ["--preview-method", "auto", "--fp16-vae", "--use-split-cross-attention", "--cpu"],
        ["--cpu", "--use-split-cross-attention", "--fp16-vae", "--preview-method", "auto"],
    ),
    (["--cache-none", "--cpu-vae"], ["--cpu-vae", "--cache-none"]),
]


@pytest.mark.parametrize(("args", "expected"), CANONICAL)
def test_args_are_canonical_non_default_flags(args: list[str], expected: list[str]) -> None:
    assert LaunchFlags.parse(args).args() == expected
