"""The emulator's own command-line options, the ones ComfyUI does not have: declared here,
outside the emulator, because the launcher writes them (`workers.supervision.launch.emulator_argv`)
and
the gateway removes them before it checks a worker's ComfyUI flags (`gateway.settings`).
"""

from __future__ import annotations

import argparse


def add_emulator_options(parser: argparse.ArgumentParser) -> None:
    """Declare the emulator's own options on `parser`: the ones ComfyUI does not have (removed
    from the argv `/system_stats` shows), written by `emulator_argv`."""
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
        "--page-cache",
        metavar="DIR",
        help="a folder the emulators of one host share as its page cache: a model file one of"
        " them read from disk loads from the page cache for all (default: this one's reads)",
    )
    own.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="arm a fault hook at start (see GET/POST /emulator/faults)",
    )


def split_emulator_options(argv: list[str]) -> list[str]:
    """The argv without the emulator's own options: ComfyUI's flags, in their order."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_emulator_options(parser)
    _, rest = parser.parse_known_args(argv)
    return rest
