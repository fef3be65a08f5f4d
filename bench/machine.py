"""The machine a benchmark ran on, in one line for its results file."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe() -> str:
    """Cores and CPU model, Python, the OS, and the load average when it is called."""
    cpu = platform.processor() or "unknown CPU"
    info = Path("/proc/cpuinfo")
    if info.exists():
        names = [
            ln.split(":", 1)[1].strip()
            for ln in info.read_text().splitlines()
            if ln.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; 1-minute load average at the start: {load:.2f}"
    )
