"""ComfyUI 0.3.64's command line: every launch flag it declares (names, values, exclusive
groups), as `comfy/cli_args.py` does, so that a command line ComfyUI would refuse is refused
before a worker is started with it (`comfyui_refuses`), and the emulator accepts exactly what
ComfyUI accepts. Unlike ComfyUI, abbreviated flags are not accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from workers.comfy.flags import PREVIEW_METHODS

# Groups of switches ComfyUI declares mutually exclusive.
_EXCLUSIVE_SWITCHES: tuple[tuple[str, ...], ...] = (
    ("--cuda-malloc", "--disable-cuda-malloc"),
    ("--force-fp32", "--force-fp16"),
    (
        "--fp32-unet",
        "--fp64-unet",
        "--bf16-unet",
        "--fp16-unet",
        "--fp8_e4m3fn-unet",
        "--fp8_e5m2-unet",
        "--fp8_e8m0fnu-unet",
    ),
    ("--fp16-vae", "--fp32-vae", "--bf16-vae"),
    (
        "--fp8_e4m3fn-text-enc",
        "--fp8_e5m2-text-enc",
        "--fp16-text-enc",
        "--fp32-text-enc",
        "--bf16-text-enc",
    ),
    (
        "--use-split-cross-attention",
        "--use-quad-cross-attention",
        "--use-pytorch-cross-attention",
        "--use-sage-attention",
        "--use-flash-attention",
    ),
    ("--force-upcast-attention", "--dont-upcast-attention"),
    ("--gpu-only", "--highvram", "--normalvram", "--lowvram", "--novram", "--cpu"),
)

_SWITCHES = (
    "--auto-launch",
    "--disable-auto-launch",
    "--cpu-vae",
    "--force-channels-last",
    "--disable-ipex-optimize",
    "--supports-fp8-compute",
    "--disable-xformers",
    "--async-offload",
    "--force-non-blocking",
    "--disable-smart-memory",
    "--deterministic",
    "--mmap-torch-files",
    "--disable-mmap",
    "--dont-print-server",
    "--quick-test-for-ci",
    "--windows-standalone-build",
    "--disable-metadata",
    "--disable-all-custom-nodes",
    "--disable-api-nodes",
    "--multi-user",
    "--log-stdout",
    "--enable-compress-response-body",
)

# Flags taking one value, with its type.
_VALUED: tuple[tuple[str, type], ...] = (
    ("--port", int),
    ("--tls-keyfile", str),
    ("--tls-certfile", str),
    ("--max-upload-size", float),
    ("--base-directory", str),
    ("--output-directory", str),
    ("--temp-directory", str),
    ("--input-directory", str),
    ("--cuda-device", int),
    ("--default-device", int),
    ("--oneapi-device-selector", str),
    ("--preview-size", int),
    ("--reserve-vram", float),
    ("--front-end-version", str),
    ("--front-end-root", str),
    ("--user-directory", str),
    ("--comfy-api-base", str),
    ("--database-url", str),
)


CACHE_GROUP = ("--cache-classic", "--cache-lru", "--cache-none")


def exclusive_with(flag: str) -> tuple[str, ...]:
    """The flags ComfyUI refuses together with `flag`, itself included (just itself when it
    belongs to no exclusive group)."""
    for group in (*_EXCLUSIVE_SWITCHES, CACHE_GROUP):
        if flag in group:
            return group
    return (flag,)


def add_comfyui_flags(parser: argparse.ArgumentParser) -> None:
    """Declare every ComfyUI 0.3.64 launch flag on `parser`, with its exclusive groups."""
    comfy = parser.add_argument_group("ComfyUI 0.3.64 launch flags")
    comfy.add_argument("--listen", nargs="?", const="0.0.0.0,::", default="127.0.0.1")
    comfy.add_argument("--enable-cors-header", nargs="?", const="*", default=None)
    comfy.add_argument("--extra-model-paths-config", nargs="+", action="append")
    comfy.add_argument("--directml", type=int, nargs="?", const=-1)
    comfy.add_argument("--preview-method", choices=PREVIEW_METHODS, default="none")
    comfy.add_argument("--default-hashing-function", choices=["md5", "sha1", "sha256", "sha512"])
    comfy.add_argument("--fast", nargs="*")
    comfy.add_argument("--whitelist-custom-nodes", nargs="+", default=[])
    levels = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    comfy.add_argument("--verbose", nargs="?", const="DEBUG", default="INFO", choices=levels)
    for flag, kind in _VALUED:
        comfy.add_argument(flag, type=kind)
    for flag in _SWITCHES:
        comfy.add_argument(flag, action="store_true")
    for group in _EXCLUSIVE_SWITCHES:
        exclusive = parser.add_mutually_exclusive_group()
        for flag in group:
            exclusive.add_argument(flag, action="store_true")
    cache = parser.add_mutually_exclusive_group()  # CACHE_GROUP
    cache.add_argument("--cache-classic", action="store_true")
    cache.add_argument("--cache-lru", type=int, default=0)
    cache.add_argument("--cache-none", action="store_true")


class _Refused(Exception):
    pass


class _QuietParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def comfyui_refuses(args: Sequence[str]) -> str | None:
    """Why ComfyUI 0.3.64's parser refuses these launch flags (an unknown flag, two of one
    exclusive group, a bad value); None when it takes them."""
    parser = _QuietParser(add_help=False, allow_abbrev=False)
    add_comfyui_flags(parser)
    try:
        parser.parse_args(list(args))
    except _Refused as exc:
        return str(exc)
    return None
