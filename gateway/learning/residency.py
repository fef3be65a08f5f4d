"""What an instance holds, inferred from what it ran (it cannot be asked).

Pure bookkeeping over model keys, most recently used first:

- every finished prompt makes its models the most recent (`cost.touch`), the cache keeping
  `slots` (1 under ComfyUI's classic cache; under `--cache-lru N` the checkpoints that N node
  results hold, `gateway.learning.learn.cache_slots`);
- evidence corrects the belief: the loader listed in `execution_cached` means its models were
  resident; a load phase close to a real load means they were not (a short one means they were);
- memory bounds it: models past what fits in the card's memory (pynvml) are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gateway.scheduler.cost import touch

LOADED_FRACTION = 0.3
"""A load phase shorter than this fraction of an expected load means nothing was loaded."""


@dataclass(frozen=True)
class Evidence:
    models: frozenset[str]
    """The model keys the prompt used."""
    loader_cached: bool | None = None
    """True if `execution_cached` listed its loader nodes, False if they executed."""
    load_s: float | None = None
    """Seconds of the loader phase, if timed."""
    expected_load_s: float | None = None
    """What loading its models from the page cache would have taken."""


def was_resident(evidence: Evidence) -> bool | None:
    """Whether the prompt's models were resident before it ran; None when nothing tells."""
    if evidence.loader_cached is not None:
        return evidence.loader_cached
    if evidence.load_s is not None and evidence.expected_load_s:
        return evidence.load_s < LOADED_FRACTION * evidence.expected_load_s
    return None


def after_prompt(believed: tuple[str, ...], evidence: Evidence, slots: int) -> tuple[str, ...]:
    """The belief once the prompt has run."""
    return touch(believed, evidence.models, slots)


def surprised(believed: tuple[str, ...], evidence: Evidence) -> bool:
    """Whether the evidence contradicts the belief (so `slots` or the belief is wrong)."""
    resident = was_resident(evidence)
    return resident is not None and resident != (evidence.models <= set(believed))


def within_memory(
    resident: tuple[str, ...], size_mib: Mapping[str, float], vram_total_mib: float | None
) -> tuple[str, ...]:
    """The most recent models that fit in the card's memory together (unknown sizes count 0)."""
    if vram_total_mib is None:
        return resident
    kept: list[str] = []
    used = 0.0
    for key in resident:
        used += size_mib.get(key, 0.0)
        if kept and used > vram_total_mib:
            break
        kept.append(key)
    return tuple(kept)
