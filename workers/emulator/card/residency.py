"""Which checkpoints one ComfyUI instance holds, following ComfyUI's cache and VRAM rules.

Pure bookkeeping, no I/O: the emulator calls it per prompt, the scheduler simulator per job.
Rules (PROTOCOL.md 3.3-3.4):
- the node cache holds loader outputs: classic keeps only the checkpoints of the current
  prompt (so after a prompt, exactly those of the previous one); `--cache-none` keeps nothing
  across prompts; `--cache-lru N` keeps N node *results*, not N checkpoints: at the start of
  each prompt it drops whole prompts' results, oldest first, until at most N are left (never
  the current prompt's), so a checkpoint stays only while the results of the prompts since
  its last use fit in N. Each prompt is counted as the standard txt2img graph with a fresh
  seed (`PromptResults`): under `--cache-lru 8` a third checkpoint evicts the first, and a
  prompt that reuses a checkpoint evicts every other one. A checkpoint that leaves the node
  cache leaves VRAM too (its ModelPatcher is garbage-collected).
- cached checkpoints stay in VRAM until space is needed; then the least recently used are
  moved to host RAM (still cached), and a later use copies them back: a RAM-tier load.
- with `--lowvram`, `--novram` or `--cpu` the weights live in host RAM and VRAM is no limit;
  a checkpoint that was loaded before comes back as a RAM-tier load even after the cache
  dropped it (measured: 0.35 s instead of 4-6 s, calibration/README.md).
- otherwise a file read before comes from the page cache, else from disk: read by this
  instance, or by any emulator of its host when they share a page cache (`pagecache`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from workers.comfy.flags import CacheMode, LaunchFlags, VramMode
from workers.comfy.prompt_results import TXT2IMG, PromptResults
from workers.emulator.card.costmodel import LoadTier
from workers.emulator.card.pagecache import PageCache
from workers.emulator.card.profiles import Profile
from workers.emulator.execution.nodecache import NodeCache

_HOST_RAM_MODES = frozenset({VramMode.LOW, VramMode.NO})


class Residency:
    """The model state of one instance; mutate it with one call per prompt."""

    def __init__(
        self,
        profile: Profile,
        flags: LaunchFlags,
        *,
        files_read: Iterable[str] = (),
        results: PromptResults = TXT2IMG,
        page_cache: PageCache | None = None,
    ) -> None:
        """An empty instance; `files_read` are checkpoint files already in the page cache;
        `results`: what each prompt leaves in the node cache (under `--cache-lru`);
        `page_cache`: its host's, shared with other instances (default: its own reads)."""
        self._profile = profile
        self._flags = flags
        self._results = results
        self._nodes = NodeCache(CacheMode.LRU, flags.cache_lru_size)
        self._prompts = 0
        self._host_ram = flags.cpu or flags.vram_mode in _HOST_RAM_MODES
        self._cache: dict[str, str] = {}  # checkpoint -> family, most recently used last
        self._vram: dict[str, str] = {}  # a subset of _cache, most recently used last
        self.page_cache: PageCache = set() if page_cache is None else page_cache
        for name in files_read:
            self.page_cache.add(name)
        self._in_host_ram: set[str] = set()

    def touch(self, checkpoint: str, family: str) -> LoadTier | None:
        """Run one prompt that uses one checkpoint; the tier it loads from, None if resident."""
        return self.run_prompt([(checkpoint, family)])[0]

    def run_prompt(self, models: Sequence[tuple[str, str]]) -> tuple[LoadTier | None, ...]:
        """Run one prompt that uses `models` ((checkpoint, family) pairs, in execution order);
        one tier (or None) per model. A prompt with no checkpoint is `run_prompt(())`."""
        self._start_prompt(models)
        tiers = tuple(self._use(checkpoint, family) for checkpoint, family in models)
        self._end_prompt()
        return tiers

    def peek(self, checkpoint: str) -> LoadTier | None:
        """The tier `checkpoint` would load from if the next prompt used it alone."""
        if checkpoint in self._vram:
            return None
        if checkpoint in self._cache or checkpoint in self._in_host_ram:
            return LoadTier.RAM
        if checkpoint in self.page_cache:
            return LoadTier.PAGE_CACHE
        return LoadTier.DISK

    def resident(self) -> tuple[str, ...]:
        """Checkpoints ready to run without a load (in VRAM; in host RAM under --lowvram,
        --novram, --cpu), most recently used first."""
        return tuple(reversed(self._vram))

    def cached(self) -> tuple[str, ...]:
        """Checkpoints whose loader output is in the node cache (VRAM or host RAM), MRU first."""
        return tuple(reversed(self._cache))

    def vram_used_mib(self) -> float:
        """Weights in VRAM (0 when they live in host RAM)."""
        if self._host_ram:
            return 0.0
        return sum(self._size_mib(family) for family in self._vram.values())

    def forget_all(self) -> None:
        """POST /free {"free_memory": true}: cache and VRAM cleared (files stay page-cached)."""
        self._nodes.clear()
        self._cache.clear()
        self._vram.clear()
        self._in_host_ram.clear()

    def unload_models(self) -> None:
        """POST /free {"unload_models": true}: weights leave VRAM, the node cache keeps them,
        so the next use is a RAM-tier load."""
        self._vram.clear()

    def _start_prompt(self, models: Sequence[tuple[str, str]]) -> None:
        mode = self._flags.cache_mode
        wanted = {checkpoint for checkpoint, _ in models}
        if mode == CacheMode.CLASSIC:
            self._drop(c for c in self._cache if c not in wanted)
        elif mode == CacheMode.NONE:
            self._drop(self._cache)
        else:
            self._lru_prompt(models)

    def _lru_prompt(self, models: Sequence[tuple[str, str]]) -> None:
        """ComfyUI's LRU of node results at the start of a prompt: the prompt's results are
        marked used, whole older prompts are dropped until N results are left; a checkpoint
        whose loader result went leaves the cache. The prompt's results are then stored."""
        self._prompts += 1
        keys = self._result_keys(models)
        self._nodes.set_prompt(keys)
        self._drop([c for c in self._cache if not self._nodes.holds(_loader_key(c))])
        for node_id in keys:
            self._nodes.set(node_id, True)

    def _result_keys(self, models: Sequence[tuple[str, str]]) -> dict[str, Hashable]:
        shape = self._results
        keys: dict[str, Hashable] = {}
        for checkpoint, family in models:
            keys[f"load:{checkpoint}"] = _loader_key(checkpoint)
            for i in range(1, shape.per_model):
                keys[f"model{i}:{checkpoint}"] = ("model", checkpoint, i)
            for i in range(shape.per_family):
                keys[f"family{i}:{family}"] = ("family", family, i)
        for i in range(shape.fresh):
            keys[f"fresh{i}"] = ("fresh", self._prompts, i)
        return keys

    def _end_prompt(self) -> None:
        if self._flags.cache_mode == CacheMode.NONE:
            self._drop(self._cache)

    def _use(self, checkpoint: str, family: str) -> LoadTier | None:
        tier = self.peek(checkpoint)
        self._cache.pop(checkpoint, None)
        self._cache[checkpoint] = family
        self.page_cache.add(checkpoint)
        if self._host_ram:
            self._in_host_ram.add(checkpoint)
        self._make_room(family, keep=checkpoint)
        self._vram.pop(checkpoint, None)
        self._vram[checkpoint] = family
        return tier

    def _make_room(self, family: str, *, keep: str) -> None:
        """Move least recently used models to host RAM until `family` fits (ComfyUI's
        free_memory); a model that does not fit even alone is loaded partially, as ComfyUI
        does, and counts as resident."""
        if self._host_ram or keep in self._vram:
            return
        need_mib = self._size_mib(family)
        while self._vram and self.vram_used_mib() + need_mib > self._profile.vram_usable_mib:
            del self._vram[next(iter(self._vram))]

    def _drop(self, checkpoints: Iterable[str]) -> None:
        for checkpoint in list(checkpoints):
            self._cache.pop(checkpoint, None)
            self._vram.pop(checkpoint, None)

    def _size_mib(self, family: str) -> float:
        return self._profile.family(family).model_size_mib


def _loader_key(checkpoint: str) -> Hashable:
    return ("load", checkpoint)
