"""`GET /system_stats`: versions as recorded, host RAM, and the emulated card's VRAM.

The device entry follows the profile: its name and total; `vram_free` drops by the size of
every model resident in VRAM. With `--cpu` the device is the host, as ComfyUI shows it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from workers.emulator.card.profiles import Profile
from workers.emulator.config import MIB


def host_memory() -> tuple[int, int]:
    """(total, available) bytes of host RAM."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError):
        available = total
    return total, available


def device_entry(profile: Profile, cpu: bool, used_mib: float) -> dict[str, Any]:
    """The single entry of `devices`."""
    if cpu:
        total, free = host_memory()
        return {
            "name": "cpu",
            "type": "cpu",
            "index": None,
            "vram_total": total,
            "vram_free": free,
            "torch_vram_total": total,
            "torch_vram_free": free,
        }
    total = int(profile.vram_total_mib * MIB)
    used = int(used_mib * MIB)
    return {
        "name": profile.device_name,
        "type": "cuda",
        "index": 0,
        "vram_total": total,
        "vram_free": max(0, total - used),
        "torch_vram_total": used,
        "torch_vram_free": 0,
    }


def system_stats(
    recorded_system: Mapping[str, Any],
    argv: Sequence[str],
    device: Mapping[str, Any],
) -> dict[str, Any]:
    """The body: recorded versions, this host's OS, RAM, Python, and the instance's argv."""
    total, free = host_memory()
    system = dict(recorded_system)
    system.update(
        {
            "os": os.name,
            "ram_total": total,
            "ram_free": free,
            "python_version": sys.version,
            "embedded_python": False,
            "argv": list(argv),
        }
    )
    return {"system": system, "devices": [dict(device)]}
