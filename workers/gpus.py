"""Which GPUs the workers get: what CUDA_VISIBLE_DEVICES leaves visible, and the slot syntax
of `--gpus` (one worker per slot, each slot a CUDA_VISIBLE_DEVICES value).

The one reading of CUDA_VISIBLE_DEVICES in the tree, so that the gateway plans as many workers
as CUDA would show GPUs (`-1` hides every GPU, `0,-1,1` leaves only GPU 0).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Protocol

from workers.telemetry import load_nvml


class NvmlCount(Protocol):
    """The part of `pynvml` that counts devices; `workers.telemetry.Nvml` includes it."""

    @property
    def NVMLError(self) -> type[Exception]: ...

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...


def cuda_visible_devices(value: str) -> list[str]:
    """The devices a CUDA_VISIBLE_DEVICES value leaves visible, as CUDA reads it: entries are
    indices or GPU-/MIG- UUIDs, and the first invalid entry (such as -1) hides it and every
    later one. An empty value hides every GPU."""
    visible: list[str] = []
    for entry in (part.strip() for part in value.split(",")):
        if not (_is_index(entry) or entry.startswith(("GPU-", "MIG-"))):
            break
        visible.append(entry)
    return visible


def visible_gpus(environ: Mapping[str, str], nvml: NvmlCount | None = None) -> tuple[int, ...]:
    """The GPU slots the gateway's workers can use, one per visible GPU: the devices
    CUDA_VISIBLE_DEVICES in `environ` leaves visible when set (by index when they are all
    indices, else numbered from 0), else as many as NVML counts, else none (no driver, no
    library). Never raises for missing hardware."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        visible = cuda_visible_devices(listed)
        if all(_is_index(entry) for entry in visible):
            return tuple(int(entry) for entry in visible)
        return tuple(range(len(visible)))
    backend: NvmlCount | None = nvml if nvml is not None else load_nvml()
    return tuple(range(0 if backend is None else _nvml_count(backend)))


def _nvml_count(nvml: NvmlCount) -> int:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return 0
    try:
        return int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError:
        return 0
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def parse_gpu_slots(spec: str, *, allow_shared: bool = False) -> list[str]:
    """Parse a GPU slot list: one worker per slot, each slot a CUDA_VISIBLE_DEVICES value.

    Syntax: slots are separated by ",", the GPUs of one slot joined by "+", each GPU a
    non-negative index; spaces around parts are ignored. "0,1" gives ["0", "1"] (a worker per
    GPU); "0+1,2" gives ["0,1", "2"] (one worker sees GPUs 0 and 1, another GPU 2).

    Raises ValueError for an empty spec or slot, an index that is not a non-negative integer,
    a GPU listed twice in one slot, or a GPU in two slots unless `allow_shared` (two workers
    then share that card).
    """
    if not spec.strip():
        raise ValueError("GPU slots: empty; expected e.g. '0,1' or '0+1,2'")
    slots = [_parse_slot(part, spec) for part in spec.split(",")]
    if not allow_shared:
        _refuse_shared(slots, spec)
    return [",".join(str(gpu) for gpu in slot) for slot in slots]


def _parse_slot(part: str, spec: str) -> list[int]:
    entries = [entry.strip() for entry in part.split("+")]
    if not all(entries):
        raise ValueError(f"GPU slots {spec!r}: empty slot or GPU in {part.strip()!r}")
    bad = [entry for entry in entries if not _is_index(entry)]
    if bad:
        raise ValueError(
            f"GPU slots {spec!r}: {bad[0]!r} is not a GPU index (a non-negative integer)"
        )
    gpus = [int(entry) for entry in entries]
    twice = [gpu for position, gpu in enumerate(gpus) if gpu in gpus[:position]]
    if twice:
        raise ValueError(f"GPU slots {spec!r}: GPU {twice[0]} is twice in slot {part.strip()!r}")
    return gpus


def _is_index(text: str) -> bool:
    # str.isdigit alone accepts "²", which int() refuses.
    return text.isascii() and text.isdigit()


def _refuse_shared(slots: Sequence[Sequence[int]], spec: str) -> None:
    seen: set[int] = set()
    for slot in slots:
        shared = seen.intersection(slot)
        if shared:
            raise ValueError(
                f"GPU slots {spec!r}: GPU {min(shared)} is in two slots "
                "(allow sharing a card between workers explicitly if that is meant)"
            )
        seen.update(slot)
