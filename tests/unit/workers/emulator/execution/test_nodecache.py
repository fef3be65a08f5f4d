"""The node-output cache modes, table-driven over prompt sequences (PROTOCOL.md 3.3)."""

from __future__ import annotations

import pytest

from workers.comfy.flags import CacheMode
from workers.emulator.execution.nodecache import NodeCache


def run(cache: NodeCache, keys: dict[str, str]) -> list[str]:
    """Start a prompt, note which nodes hit, store every node's output; the hits."""
    cache.set_prompt(keys)
    hits = [node for node in keys if cache.get(node) is not None]
    for node, key in keys.items():
        cache.set(node, f"out-{key}")
    return hits


A = {"load": "ckpt-A", "sample": "A-seed1"}
A2 = {"load": "ckpt-A", "sample": "A-seed2"}
B = {"load": "ckpt-B", "sample": "B-seed1"}
A3 = {"load": "ckpt-A", "sample": "A-seed3"}


@pytest.mark.parametrize(
    ("mode", "size", "expected"),
    [
        (CacheMode.CLASSIC, 0, [[], ["load"], [], []]),
        (CacheMode.LRU, 4, [[], ["load"], [], ["load"]]),
        (CacheMode.LRU, 1, [[], ["load"], [], []]),
        (CacheMode.NONE, 0, [[], [], [], []]),
    ],
)
def test_which_nodes_hit_across_prompts(
    mode: CacheMode, size: int, expected: list[list[str]]
) -> None:
    cache = NodeCache(mode, size)
    assert [run(cache, keys) for keys in (A, A2, B, A3)] == expected


def test_an_identical_prompt_hits_everything_in_classic_mode() -> None:
    cache = NodeCache(CacheMode.CLASSIC)
    run(cache, A)
    assert run(cache, A) == ["load", "sample"]


def test_equal_keys_under_other_node_ids_hit() -> None:
    cache = NodeCache(CacheMode.CLASSIC)
    run(cache, {"4": "ckpt-A"})
    assert run(cache, {"40": "ckpt-A"}) == ["40"]


def test_lru_keeps_the_current_prompts_keys_even_over_size() -> None:
    cache = NodeCache(CacheMode.LRU, 1)
    run(cache, {"a": "k1", "b": "k2", "c": "k3"})
    assert len(cache) == 3
    assert run(cache, {"a": "k1", "b": "k2", "c": "k3"}) == ["a", "b", "c"]


def test_clear_forgets_everything() -> None:
    cache = NodeCache(CacheMode.LRU, 8)
    run(cache, A)
    cache.clear()
    assert run(cache, A) == []
