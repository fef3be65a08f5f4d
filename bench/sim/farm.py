"""Farms: which cards (profiles) with which ComfyUI launch flags.

A farm spec is a name from FARMS or a comma list like `2*h200,2*rtx4070ti@lru8` (`@lru8` adds
`--cache-lru 8`; a profile alone, `h200`, is one card of it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    profile: str
    flags: tuple[str, ...] = ()


FARMS = {
    "standard": "2*h200,2*rtx4070ti",
    "standard-lru": "2*h200@lru8,2*rtx4070ti",
    "h200-lru": "4*h200@lru8",
    "uniform2": "2*h200",
    "uniform4": "4*h200",
    "uniform8": "8*h200",
    "mixed2": "1*h200,1*rtx4070ti",
    "mixed4": "2*h200,2*rtx4070ti",
    "mixed8": "4*h200,4*rtx4070ti",
    "shared4": "2*h200-shared,2*rtx4070ti",
}


def _flags(suffix: str) -> tuple[str, ...]:
    if not suffix:
        return ()
    if suffix.startswith("lru"):
        return ("--cache-lru", suffix[3:])
    raise ValueError(f"unknown flag suffix {suffix!r}")


def parse_farm(spec: str) -> tuple[WorkerSpec, ...]:
    spec = FARMS.get(spec, spec)
    out: list[WorkerSpec] = []
    for part in spec.split(","):
        count, star, rest = part.strip().partition("*")
        if not star:
            count, rest = "1", count  # `h200` alone is one of them
        profile, _, suffix = rest.partition("@")
        if not (count.isdigit() and int(count) >= 1 and profile):
            raise ValueError(
                f"farm {spec!r}: part {part!r} is not COUNT*PROFILE[@lruN] with COUNT >= 1"
                f" (e.g. 2*h200,2*rtx4070ti@lru8), nor one of {', '.join(FARMS)}"
            )
        for _ in range(int(count)):
            out.append(WorkerSpec(f"{profile}-{len(out)}", profile, _flags(suffix)))
    return tuple(out)
