"""`comfy-gateway emulate` / `python -m workers.emulator`: one emulated ComfyUI instance.

    comfy-gateway emulate --port P [--profile NAME|FILE] [--time-scale X] [--checkpoints a,b]
        [--models FOLDER=a,b ...] [--startup-s S] [--fault KEY=VALUE ...]
        [any ComfyUI 0.3.64 launch flag]

The simulated start-up delay (profile startup_s x time scale, or --startup-s) passes before
the port opens, as ComfyUI binds only when ready. Bad or conflicting flags: message, exit 2.
Without --base-directory or explicit input/output/temp directories, a fresh temporary base
directory is used. Logs go to stderr (--log-stdout: stdout), bare messages, as ComfyUI's.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from workers.comfy.flags import FlagError, LaunchFlags
from workers.comfy.modelfolders import model_folder
from workers.emulator.card.profiles import ProfileError, load_profile
from workers.emulator.cliargs import build_parser
from workers.emulator.config import DEFAULT_CHECKPOINTS, DEFAULT_MODELS, EmulatorConfig
from workers.emulator.faults import FaultError, Faults, parse_cli
from workers.emulator.http.app import create_app
from workers.emulator.http.logring import LogRing
from workers.emulator.http.server import serve
from workers.supervision.emulator_options import split_emulator_options


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _models(pairs: list[str]) -> dict[str, tuple[str, ...]]:
    """`--models FOLDER=a,b` options as folder -> files, over the defaults (a folder named
    twice: the last wins). Raises ValueError for a malformed pair or an unknown folder."""
    models = {"checkpoints": DEFAULT_CHECKPOINTS, **DEFAULT_MODELS}
    for pair in pairs:
        folder, sep, names = pair.partition("=")
        if not sep:
            raise ValueError(f"argument --models: expected FOLDER=a,b,... got {pair!r}")
        models[model_folder(folder.strip())] = _names(names)
    return models


def _directories(ns: argparse.Namespace) -> tuple[Path | None, Path, Path, Path]:
    """(base, input, output, temp); ComfyUI puts its temp dir in `<--temp-directory>/temp`. A
    base directory is made only when some directory is neither given nor under
    --base-directory; without either, base is None."""
    base = Path(ns.base_directory) if ns.base_directory else None

    def under_base(name: str) -> Path:
        nonlocal base
        if base is None:
            base = Path(tempfile.mkdtemp(prefix="comfy-emulator-"))
        return base / name

    input_dir = Path(ns.input_directory) if ns.input_directory else under_base("input")
    output_dir = Path(ns.output_directory) if ns.output_directory else under_base("output")
    temp_root = Path(ns.temp_directory) if ns.temp_directory else under_base("")
    return base, input_dir, output_dir, temp_root / "temp"


def _faults(pairs: list[str]) -> dict[str, object]:
    body = parse_cli(pairs)
    Faults().update(body)  # validate now, so a bad --fault is a usage error
    return body


def parse_config(argv: Sequence[str]) -> tuple[EmulatorConfig, argparse.Namespace]:
    """The instance's configuration; raises SystemExit(2) with a message on bad flags."""
    parser = build_parser()
    args = list(argv)
    ns = parser.parse_args(args)
    comfy_args = split_emulator_options(args)
    try:
        flags = LaunchFlags.parse(comfy_args)
        profile = load_profile(ns.profile)
        faults = _faults(ns.fault)
        models = _models(ns.models)
    except (FlagError, ProfileError, FaultError, ValueError) as exc:
        parser.error(str(exc))
    checkpoints = models.pop("checkpoints")
    if not ns.time_scale > 0:
        parser.error(f"argument --time-scale: must be > 0, got {ns.time_scale}")
    base_dir, input_dir, output_dir, temp_dir = _directories(ns)
    config = EmulatorConfig(
        profile=profile,
        input_dir=input_dir,
        output_dir=output_dir,
        temp_dir=temp_dir,
        base_dir=base_dir,
        flags=flags,
        port=ns.port if ns.port is not None else 8188,
        listen=tuple(host for host in ns.listen.split(",") if host),
        time_scale=ns.time_scale,
        startup_s=ns.startup_s,
        checkpoints=checkpoints if ns.checkpoints is None else _names(ns.checkpoints),
        models=models,
        max_upload_mb=ns.max_upload_size if ns.max_upload_size is not None else 100,
        cors_origin=ns.enable_cors_header,
        disable_metadata=ns.disable_metadata,
        disable_smart_memory=ns.disable_smart_memory,
        preview_size=ns.preview_size if ns.preview_size is not None else 512,
        argv=("main.py", *comfy_args),
        faults=faults,
        page_cache_dir=Path(ns.page_cache) if ns.page_cache else None,
    )
    return config, ns


def _configure_logging(ns: argparse.Namespace) -> LogRing:
    """Bare messages to stderr (or stdout), and the last ones kept for `/internal/logs`."""
    handler = logging.StreamHandler(sys.stdout if ns.log_stdout else sys.stderr)
    ring = LogRing()
    for each in (handler, ring):
        each.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler, ring]
    root.setLevel(ns.verbose)
    logging.getLogger("uvicorn").setLevel(logging.WARNING)
    return ring


def main(argv: Sequence[str]) -> int:
    """Run one emulated instance until SIGINT/SIGTERM; the process exit status."""
    try:
        config, ns = parse_config(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    logs = _configure_logging(ns)
    if ns.quick_test_for_ci:
        return 0
    app = create_app(config, logs=logs)
    return asyncio.run(serve(app, config, print_server=not ns.dont_print_server))
