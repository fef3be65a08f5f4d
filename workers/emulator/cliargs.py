"""The emulator's command line: ComfyUI 0.3.64's launch flags (`workers.comfy.parser`) plus the
emulator's own options (`workers.supervision.emulator_options`).

Every ComfyUI flag is accepted so a supervisor can start the emulator exactly as it starts
ComfyUI; most change nothing here (the cost model reads the ones in `flags.LaunchFlags`, the
server the directory, listen, upload, CORS and metadata ones). Unknown flags and flags of one
exclusive group combined are refused by argparse with exit status 2, as ComfyUI refuses them.
"""

from __future__ import annotations

import argparse

from workers.comfy.parser import add_comfyui_flags
from workers.supervision.emulator_options import add_emulator_options

USAGE = (
    "%(prog)s [--port P] [--profile NAME|FILE] [--time-scale X] [--checkpoints a,b,...]\n"
    "       [--models FOLDER=a,b,... ...] [--startup-s S] [--fault KEY=VALUE ...]\n"
    "       [ComfyUI 0.3.64 launch flags ...]"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="comfy-gateway emulate",
        usage=USAGE,
        description="A fake ComfyUI 0.3.64 with a calibrated cost model.",
        allow_abbrev=False,
    )
    add_emulator_options(parser)
    add_comfyui_flags(parser)
    return parser
