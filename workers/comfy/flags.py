"""ComfyUI 0.3.64 launch flags that change what a job costs, parsed like `comfy/cli_args.py`.

Only the flags the cost model reads are understood; every other ComfyUI flag is accepted and
skipped together with its values (ComfyUI takes no positional arguments, so every bare token
after a flag is one of its values). Mutually exclusive groups are refused as argparse would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class FlagError(ValueError):
    """Launch flags that ComfyUI would refuse (exclusive flags combined, a bad value)."""


class VramMode(StrEnum):
    """ComfyUI's `vram_state` as chosen by the VRAM group (`--cpu` is the `cpu` field)."""

    NORMAL = "normal"
    LOW = "low"
    NO = "no"
    HIGH = "high"
    GPU_ONLY = "gpu_only"


class CacheMode(StrEnum):
    """The node-output cache across prompts (PROTOCOL.md 3.3)."""

    CLASSIC = "classic"
    LRU = "lru"
    NONE = "none"


class Attention(StrEnum):
    """Cross-attention backend; PyTorch SDPA is ComfyUI's default on NVIDIA with torch >= 2."""

    PYTORCH = "pytorch"
    SPLIT = "split"
    QUAD = "quad"
    SAGE = "sage"
    FLASH = "flash"


class VaeDtype(StrEnum):
    """VAE weight dtype; DEFAULT is bf16 where supported, else fp32."""

    DEFAULT = "default"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"


PREVIEW_METHODS = ("none", "auto", "latent2rgb", "taesd")

# flag -> (argparse group, field, value); the group name is used in error messages.
_SWITCHES: dict[str, tuple[str, str, Any]] = {
    "--normalvram": ("vram", "vram_mode", VramMode.NORMAL),
    "--lowvram": ("vram", "vram_mode", VramMode.LOW),
    "--novram": ("vram", "vram_mode", VramMode.NO),
    "--highvram": ("vram", "vram_mode", VramMode.HIGH),
    "--gpu-only": ("vram", "vram_mode", VramMode.GPU_ONLY),
    "--cpu": ("vram", "cpu", True),
    "--use-pytorch-cross-attention": ("attention", "attention", Attention.PYTORCH),
    "--use-split-cross-attention": ("attention", "attention", Attention.SPLIT),
    "--use-quad-cross-attention": ("attention", "attention", Attention.QUAD),
    "--use-sage-attention": ("attention", "attention", Attention.SAGE),
    "--use-flash-attention": ("attention", "attention", Attention.FLASH),
    "--fp16-vae": ("vae dtype", "vae_dtype", VaeDtype.FP16),
    "--bf16-vae": ("vae dtype", "vae_dtype", VaeDtype.BF16),
    "--fp32-vae": ("vae dtype", "vae_dtype", VaeDtype.FP32),
    "--cpu-vae": ("", "cpu_vae", True),
    "--cache-classic": ("cache", "cache_mode", CacheMode.CLASSIC),
    "--cache-none": ("cache", "cache_mode", CacheMode.NONE),
}
_VALUED = {"--cache-lru": "cache", "--preview-method": ""}
_VRAM_FLAGS = {value: flag for flag, (_, field, value) in _SWITCHES.items() if field == "vram_mode"}
_ATTENTION_FLAGS = {v: f for f, (_, field, v) in _SWITCHES.items() if field == "attention"}
_VAE_FLAGS = {v: f for f, (_, field, v) in _SWITCHES.items() if field == "vae_dtype"}


@dataclass(frozen=True)
class LaunchFlags:
    """The launch configuration of one ComfyUI instance, as far as costs are concerned.

    The defaults are ComfyUI's defaults: NORMAL_VRAM, PyTorch attention, default VAE dtype,
    classic cache, no previews, on the GPU.
    """

    vram_mode: VramMode = VramMode.NORMAL
    attention: Attention = Attention.PYTORCH
    vae_dtype: VaeDtype = VaeDtype.DEFAULT
    cache_mode: CacheMode = CacheMode.CLASSIC
    cache_lru_size: int = 0
    preview_method: str = "none"
    cpu: bool = False
    cpu_vae: bool = False

    @classmethod
    def parse(cls, args: Sequence[str]) -> LaunchFlags:
        """Parse ComfyUI command-line arguments (without the program name).

        Raises FlagError for flags of one exclusive group combined (VRAM incl. `--cpu`,
        attention, VAE dtype, cache), a bad `--cache-lru` or `--preview-method` value, a
        missing value, or a bare token before the first flag.
        """
        fields: dict[str, Any] = {}
        seen: dict[str, str] = {}
        for flag, values in _tokens(args):
            if flag in _SWITCHES:
                fields.update(_switch(seen, flag, values))
            elif flag in _VALUED:
                _claim(seen, _VALUED[flag], flag)
                fields.update(_valued(flag, values))
        return replace(cls(), **fields)

    def args(self) -> list[str]:
        """The canonical command line: one flag per non-default setting, in a fixed order."""
        out: list[str] = []
        if self.cpu:
            out.append("--cpu")
        elif self.vram_mode != VramMode.NORMAL:
            out.append(_VRAM_FLAGS[self.vram_mode])
        if self.attention != Attention.PYTORCH:
            out.append(_ATTENTION_FLAGS[self.attention])
        if self.vae_dtype != VaeDtype.DEFAULT:
            out.append(_VAE_FLAGS[self.vae_dtype])
        if self.cpu_vae:
            out.append("--cpu-vae")
        out.extend(self._cache_args())
        if self.preview_method != "none":
            out.extend(["--preview-method", self.preview_method])
        return out

    def _cache_args(self) -> list[str]:
        if self.cache_mode == CacheMode.LRU:
            return ["--cache-lru", str(self.cache_lru_size)]
        if self.cache_mode == CacheMode.NONE:
            return ["--cache-none"]
        return []


def _tokens(args: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """Split a command line into (flag, values); `--flag=value` counts as one value."""
    current: tuple[str, list[str]] | None = None
    for token in args:
        if _is_flag(token):
            if current is not None:
                yield current
            name, eq, value = token.partition("=")
            current = (name, [value] if eq else [])
        elif current is None:
            raise FlagError(f"unexpected argument {token!r}: ComfyUI takes no positional arguments")
        else:
            current[1].append(token)
    if current is not None:
        yield current


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1].isdigit()


def _claim(seen: dict[str, str], group: str, flag: str) -> None:
    """Record `flag` for its exclusive group; repeating the same flag is allowed, as in argparse."""
    if not group:
        return
    other = seen.setdefault(group, flag)
    if other != flag:
        raise FlagError(f"argument {flag}: not allowed with argument {other} ({group} group)")


def _switch(seen: dict[str, str], flag: str, values: list[str]) -> dict[str, Any]:
    if values:
        raise FlagError(f"argument {flag}: takes no value, got {' '.join(values)!r}")
    group, field, value = _SWITCHES[flag]
    _claim(seen, group, flag)
    return {field: value}


def _valued(flag: str, values: list[str]) -> dict[str, Any]:
    if len(values) != 1:
        raise FlagError(f"argument {flag}: expected one argument, got {len(values)}")
    if flag == "--cache-lru":
        return _cache_lru(values[0])
    if values[0] not in PREVIEW_METHODS:
        choices = ", ".join(PREVIEW_METHODS)
        raise FlagError(f"argument --preview-method: invalid choice {values[0]!r} ({choices})")
    return {"preview_method": values[0]}


def _cache_lru(value: str) -> dict[str, Any]:
    try:
        size = int(value)
    except ValueError:
        raise FlagError(f"argument --cache-lru: invalid int value {value!r}") from None
    if size < 0:
        raise FlagError(f"argument --cache-lru: must be >= 0, got {size}")
    # ComfyUI only switches to the LRU cache for a positive size; 0 leaves the classic cache.
    mode = CacheMode.LRU if size > 0 else CacheMode.CLASSIC
    return {"cache_mode": mode, "cache_lru_size": size}
