"""The node-output cache across prompts, keyed by input signature (PROTOCOL.md 3.3).

Three modes, as ComfyUI 0.3.64's `CacheSet`:
- classic: at the start of each prompt every entry whose key the prompt does not use is dropped,
  so only the previous prompt's results survive (an identical prompt is fully cached);
- lru N: entries carry the generation (prompt count) they were last used in; at the start of a
  prompt, while more than N entries exist, whole oldest generations are dropped (never the
  current prompt's keys, so the cache may exceed N during a prompt);
- none: everything is dropped at the start of each prompt.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from workers.comfy.flags import CacheMode


class NodeCache:
    """Values (node outputs or UI outputs) by the signature of the node that produced them."""

    def __init__(self, mode: CacheMode, lru_size: int = 0) -> None:
        self.mode = mode
        self.lru_size = lru_size
        self._values: dict[Hashable, Any] = {}
        self._keys: dict[str, Hashable] = {}
        self._used: dict[Hashable, int] = {}
        self._generation = 0
        self._min_generation = 0

    def __len__(self) -> int:
        return len(self._values)

    def set_prompt(self, keys: Mapping[str, Hashable]) -> None:
        """Start a prompt whose nodes have these signatures; evicts per the mode."""
        self._keys = dict(keys)
        if self.mode is CacheMode.NONE:
            self._values.clear()
        elif self.mode is CacheMode.CLASSIC:
            used = set(self._keys.values())
            self._values = {k: v for k, v in self._values.items() if k in used}
        else:
            self._generation += 1
            for node_id in self._keys:
                self._mark_used(node_id)
            self._evict_generations()

    def _mark_used(self, node_id: str) -> None:
        key = self._keys.get(node_id)
        if key is not None:
            self._used[key] = self._generation

    def _evict_generations(self) -> None:
        while len(self._values) > self.lru_size and self._min_generation < self._generation:
            self._min_generation += 1
            stale = [k for k in self._values if self._used[k] < self._min_generation]
            for key in stale:
                del self._values[key]
                del self._used[key]

    def get(self, node_id: str) -> Any | None:
        """The cached value for this node of the current prompt, or None."""
        if self.mode is CacheMode.LRU:
            self._mark_used(node_id)
        key = self._keys.get(node_id)
        return None if key is None else self._values.get(key)

    def set(self, node_id: str, value: Any) -> None:
        if self.mode is CacheMode.LRU:
            self._mark_used(node_id)
        key = self._keys.get(node_id)
        if key is not None:
            self._values[key] = value

    def holds(self, key: Hashable) -> bool:
        """Whether a result of this signature is cached (of this prompt or an earlier one)."""
        return key in self._values

    def node_ids(self) -> list[str]:
        """Node ids of the current prompt (the ones that have a key)."""
        return list(self._keys)

    def clear(self) -> None:
        """POST /free {"free_memory": true}: the executor's caches are rebuilt empty."""
        self._values.clear()
        self._used.clear()
        self._keys = {}
