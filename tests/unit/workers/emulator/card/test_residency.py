"""Residency: ComfyUI's node cache modes and VRAM bound decide where a checkpoint loads from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.comfy.flags import LaunchFlags
from workers.emulator.card.costmodel import LoadTier
from workers.emulator.card.pagecache import SharedPageCache
from workers.emulator.card.profiles import load_profile
from workers.emulator.card.residency import Residency

DISK, PAGE, RAM = LoadTier.DISK, LoadTier.PAGE_CACHE, LoadTier.RAM
REAL_CACHE_RUN = Path(__file__).parents[5] / "bench" / "data" / "real_gpu" / "h200-cache-lru.json"
FAMILY = {"A": "sd15", "B": "sd15", "C": "sd15", "X": "sdxl", "Y": "sdxl", "Z": "sdxl"}


def instance(profile: str = "h200", *args: str, files_read: tuple[str, ...] = ()) -> Residency:
    return Residency(load_profile(profile), LaunchFlags.parse(args), files_read=files_read)


def replay(residency: Residency, sequence: str) -> list[LoadTier | None]:
    """One single-checkpoint prompt per letter."""
    return [residency.touch(name, FAMILY[name]) for name in sequence]


# PROTOCOL.md 3.3: A, A, B (other checkpoint), A again.
SEQUENCES = [
    ("classic reloads A after B", (), "AABA", [DISK, None, DISK, PAGE]),
    ("lru keeps A cached across B", ("--cache-lru", "8"), "AABA", [DISK, None, DISK, None]),
    ("none loads every time", ("--cache-none",), "AABA", [DISK, PAGE, DISK, PAGE]),
    ("classic alternating reloads every time", (), "ABABA", [DISK, DISK, PAGE, PAGE, PAGE]),
    ("lru of 2 evicts the oldest", ("--cache-lru", "2"), "ABCA", [DISK, DISK, DISK, PAGE]),
    # N counts node results, not checkpoints: a txt2img prompt leaves 7 of them.
    (
        "lru of 2 results keeps no earlier checkpoint",
        ("--cache-lru", "2"),
        "ABCBC",
        [DISK, DISK, DISK, PAGE, PAGE],
    ),
    (
        "lru 8 keeps none of three checkpoints in turn",
        ("--cache-lru", "8"),
        "ABCABC",
        [DISK, DISK, DISK, PAGE, PAGE, PAGE],
    ),
    (
        "lru 8: reusing a checkpoint evicts the other",
        ("--cache-lru", "8"),
        "ABAB",
        [DISK, DISK, None, PAGE],
    ),
    ("lru 10 keeps two in turn", ("--cache-lru", "10"), "ABABAB", [DISK, DISK] + [None] * 4),
    ("lru 16 keeps three in turn", ("--cache-lru", "16"), "ABCABC", [DISK] * 3 + [None] * 3),
    (
        "a run of one checkpoint pushes another out",
        ("--cache-lru", "16"),
        "ABAAAAB",
        [DISK, DISK, None, None, None, None, PAGE],
    ),
    ("lowvram: a return comes from RAM", ("--lowvram",), "AXA", [DISK, DISK, RAM]),
    ("novram: a return comes from RAM", ("--novram",), "AXXA", [DISK, DISK, None, RAM]),
    ("cpu: a return comes from RAM", ("--cpu",), "AXA", [DISK, DISK, RAM]),
    ("highvram follows the cache like normal", ("--highvram",), "AXA", [DISK, DISK, PAGE]),
]


@pytest.mark.parametrize(
    ("what", "args", "sequence", "tiers"), SEQUENCES, ids=[s[0] for s in SEQUENCES]
)
def test_load_tiers_follow_the_cache_mode(
    what: str, args: tuple[str, ...], sequence: str, tiers: list[LoadTier | None]
) -> None:
    assert replay(instance("h200", *args), sequence) == tiers


RESIDENT = [
    ((), "AAB", ("B",)),
    ((), "ABA", ("A",)),
    (("--cache-lru", "8"), "AB", ("B", "A")),
    (("--cache-lru", "8"), "ABA", ("A",)),
    (("--cache-lru", "8"), "ABXA", ("A", "X")),
    (("--cache-lru", "22"), "ABXA", ("A", "X", "B")),
    (("--cache-none",), "AB", ()),
]


@pytest.mark.parametrize(("args", "sequence", "resident"), RESIDENT)
def test_resident_lists_the_models_in_vram_most_recent_first(
    args: tuple[str, ...], sequence: str, resident: tuple[str, ...]
) -> None:
    residency = instance("h200", *args)
    replay(residency, sequence)
    assert residency.resident() == resident


def test_a_file_read_before_comes_from_the_page_cache() -> None:
    residency = instance(files_read=("B",))
    assert replay(residency, "BA") == [PAGE, DISK]


# The VRAM cases keep enough node results (22: four txt2img checkpoints in turn) for VRAM, not
# the node cache, to be the bound.


def test_sdxl_does_not_fit_twice_in_12_gb() -> None:
    residency = instance("rtx4070ti", "--cache-lru", "22")
    assert replay(residency, "XYX") == [DISK, DISK, RAM]
    assert residency.resident() == ("X",)
    assert residency.cached() == ("X", "Y")
    assert residency.vram_used_mib() <= load_profile("rtx4070ti").vram_usable_mib


def test_sd15_and_sdxl_fit_together_in_12_gb() -> None:
    residency = instance("rtx4070ti", "--cache-lru", "22")
    assert replay(residency, "AXA") == [DISK, DISK, None]
    assert residency.resident() == ("A", "X")


def test_an_h200_under_cache_lru_8_reloads_three_sdxl_checkpoints_in_turn() -> None:
    """8 node results are about one prompt's: VRAM for 20 SDXL checkpoints does not help."""
    residency = instance("h200", "--cache-lru", "8")
    assert replay(residency, "XYZXYZ") == [DISK, DISK, DISK, PAGE, PAGE, PAGE]


def test_an_h200_holds_three_sdxl_checkpoints_in_turn_with_22_results() -> None:
    residency = instance("h200", "--cache-lru", "22")
    assert replay(residency, "XYZXYZ") == [DISK, DISK, DISK, None, None, None]


def test_the_reloads_measured_on_an_h200_are_predicted() -> None:
    """bench/data/real_gpu/h200-cache-lru.json (`python -m bench.cache_lru`): ComfyUI 0.3.64 on
    an H200, one instance per cache mode, 15 txt2img prompts over three SD1.5 checkpoints;
    whether the loader ran, per prompt."""
    measured = json.loads(REAL_CACHE_RUN.read_text())
    for mode, rows in measured["modes"].items():
        args = () if mode == "classic" else ("--cache-lru", mode)
        residency = instance("h200", *args)
        for row in rows:
            predicted = residency.touch(row["ckpt"], "sd15") is not None
            assert predicted == row["reloaded"], (mode, row)


def test_the_least_recently_used_model_leaves_vram_first() -> None:
    residency = instance("rtx4070ti", "--cache-lru", "22")
    replay(residency, "AXA")  # order of use: X then A
    replay(residency, "Y")  # Y needs the room of X, A stays
    assert residency.resident() == ("Y", "A")
    assert replay(residency, "AX") == [None, RAM]


def test_lowvram_is_not_bounded_by_vram() -> None:
    residency = instance("rtx4070ti", "--lowvram", "--cache-lru", "8")
    assert replay(residency, "XYX") == [DISK, DISK, None]
    assert residency.vram_used_mib() == 0


def test_unload_models_keeps_the_cache_so_the_next_use_is_from_ram() -> None:
    residency = instance()
    replay(residency, "A")
    residency.unload_models()
    assert residency.resident() == ()
    assert residency.cached() == ("A",)
    assert replay(residency, "A") == [RAM]


def test_free_memory_forgets_everything_but_the_page_cache() -> None:
    residency = instance("h200", "--lowvram")
    replay(residency, "A")
    residency.forget_all()
    assert residency.cached() == ()
    assert replay(residency, "A") == [PAGE]


def test_peek_does_not_change_anything() -> None:
    residency = instance()
    replay(residency, "A")
    assert residency.peek("B") is DISK
    assert residency.peek("A") is None
    assert replay(residency, "A") == [None]


def test_a_prompt_with_several_checkpoints_keeps_them_all() -> None:
    residency = instance()
    assert residency.run_prompt([("A", "sd15"), ("X", "sdxl")]) == (DISK, DISK)
    assert residency.run_prompt([("X", "sdxl")]) == (None,)
    assert residency.run_prompt([("A", "sd15")]) == (PAGE,)


def test_a_prompt_without_a_checkpoint_drops_the_classic_cache() -> None:
    residency = instance()
    replay(residency, "A")
    assert residency.run_prompt(()) == ()
    assert residency.resident() == ()
    assert replay(residency, "A") == [PAGE]


@pytest.mark.parametrize("shared", [True, False])
def test_instances_of_one_host_share_its_page_cache_only_when_told(
    tmp_path: Path, shared: bool
) -> None:
    """Two emulators of one host (two processes: a page cache each, on one folder): a file
    one read from disk is a page-cache read for the other; without the folder, each reads
    from disk once."""
    flags = LaunchFlags.parse(())

    def started() -> Residency:
        page_cache = SharedPageCache(tmp_path / "page-cache") if shared else None
        return Residency(load_profile("h200"), flags, page_cache=page_cache)

    first, second = started(), started()
    assert first.touch("A", "sd15") is DISK
    assert second.touch("A", "sd15") is (PAGE if shared else DISK)
    assert second.touch("B", "sd15") is DISK
    assert first.touch("B", "sd15") is (PAGE if shared else DISK)
    assert "models/A.safetensors" not in SharedPageCache(tmp_path / "other")
