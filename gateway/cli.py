"""`comfy-gateway`: one console script, one subcommand per job."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = """usage: comfy-gateway {serve,emulate,ab,tune} [options]

  serve     run the gateway in front of a farm (embedded Redis and emulated workers by default)
  emulate   run one emulated ComfyUI instance
  ab        `ab report NAME`: an A/B experiment's report, a table and a PNG plot
  tune      relaunch one worker with each candidate launch flag and measure what each changes

`comfy-gateway SUBCOMMAND --help` lists each subcommand's options."""


def _serve(argv: Sequence[str]) -> int:
    from gateway.serve import main

    return main(argv)


def _emulate(argv: Sequence[str]) -> int:
    from workers.emulator.cli import main

    return main(argv)


def _ab(argv: Sequence[str]) -> int:
    from gateway.ledger.cli import main

    return main(argv)


def _tune(argv: Sequence[str]) -> int:
    from gateway.ledger.tune import main

    return main(argv)


SUBCOMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "serve": _serve,
    "emulate": _emulate,
    "ab": _ab,
    "tune": _tune,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE)
        return 0 if args else 2
    command = SUBCOMMANDS.get(args[0])
    if command is None:
        print(f"comfy-gateway: unknown subcommand {args[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return command(args[1:])
