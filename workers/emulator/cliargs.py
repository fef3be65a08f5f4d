"""The command line: ComfyUI 0.3.64's launch flags (names, values, exclusive groups) plus the
emulator's own options.

Every ComfyUI flag is accepted so a supervisor can start the emulator exactly as it starts
ComfyUI; most change nothing here (the cost model reads the ones in `flags.LaunchFlags`, the
server the directory, listen, upload, CORS and metadata ones). Unknown flags and flags of one
exclusive group combined are refused by argparse with exit status 2, as ComfyUI refuses them.
Unlike ComfyUI, abbreviated flags are not accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from workers.emulator.flags import PREVIEW_METHODS

USAGE = (
    "%(prog)s [--port P] [--profile NAME|FILE] [--time-scale X] [--checkpoints a,b,...]\n"
    "       [--models FOLDER=a,b,... ...] [--startup-s S] [--fault KEY=VALUE ...]\n"
    "       [ComfyUI 0.3.64 launch flags ...]"
)

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


def _add_comfyui(parser: argparse.ArgumentParser) -> None:
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


def add_emulator_options(parser: argparse.ArgumentParser) -> None:
    """The options ComfyUI does not have (removed from the argv `/system_stats` shows)."""
    own = parser.add_argument_group("emulator")
    own.add_argument(
        "--profile", default="h200", help="card profile: a shipped name or a JSON file"
    )
    own.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every emulated duration (0.01: 100x faster)",
    )
    own.add_argument("--checkpoints", help="comma-separated checkpoint names this instance offers")
    own.add_argument(
        "--models",
        action="append",
        default=[],
        metavar="FOLDER=a,b,...",
        help="the files of one model folder (diffusion_models, text_encoders, vae, loras, ...;"
        " legacy names unet, clip); repeatable; 'FOLDER=' offers none",
    )
    own.add_argument(
        "--startup-s",
        type=float,
        help="seconds before the port opens (default: the profile's startup_s x time scale)",
    )
    own.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="arm a fault hook at start (see GET/POST /emulator/faults)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="comfy-gateway emulate",
        usage=USAGE,
        description="A fake ComfyUI 0.3.64 with a calibrated cost model.",
        allow_abbrev=False,
    )
    add_emulator_options(parser)
    _add_comfyui(parser)
    return parser


class _Refused(Exception):
    pass


class _QuietParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def comfyui_refuses(args: Sequence[str]) -> str | None:
    """Why ComfyUI 0.3.64's parser refuses these launch flags (an unknown flag, two of one
    exclusive group, a bad value); None when it takes them."""
    parser = _QuietParser(add_help=False, allow_abbrev=False)
    _add_comfyui(parser)
    try:
        parser.parse_args(list(args))
    except _Refused as exc:
        return str(exc)
    return None


def split_emulator_options(argv: list[str]) -> list[str]:
    """The argv without the emulator's own options: ComfyUI's flags, in their order."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_emulator_options(parser)
    _, rest = parser.parse_known_args(argv)
    return rest
