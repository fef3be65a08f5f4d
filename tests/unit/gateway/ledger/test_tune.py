"""The tuner's pure parts: candidate args, the command line, the recommendation."""

from __future__ import annotations

import random
from typing import Any

from gateway.ledger.tune import candidates, recommended, reseeded, split_flags, with_flag


def test_a_candidate_replaces_the_flags_comfyui_refuses_beside_it() -> None:
    assert with_flag(["--fp32-vae", "--cache-lru", "8"], "--fp16-vae") == (
        "--cache-lru",
        "8",
        "--fp16-vae",
    )
    assert with_flag(["--fp32-vae", "--cache-lru", "8"], "--cache-none") == (
        "--fp32-vae",
        "--cache-none",
    )
    assert with_flag(["--lowvram"], "--use-sage-attention") == (
        "--lowvram",
        "--use-sage-attention",
    )


def test_candidates_skip_the_baseline_itself_and_what_comfyui_refuses() -> None:
    found = dict(candidates(["--fp16-vae"], ["--fp16-vae", "--fp32-vae", "--no-such-flag"]))
    assert found == {"--fp32-vae": ("--fp32-vae",)}
    assert len(candidates([], [])) > 8  # the default list


def test_the_candidates_follow_flags_up_to_the_tuners_own_options() -> None:
    argv = ["--worker", "w", "--flags", "--fp16-vae", "--cache-lru", "4", "--warm", "3"]
    own, asked = split_flags(argv)
    assert asked == ["--fp16-vae", "--cache-lru 4"]
    assert own == ["--worker", "w", "--flags", "--warm", "3"]


def test_new_seeds_the_same_work() -> None:
    prompt: dict[str, Any] = {"3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 20}}}
    again = reseeded(prompt, random.Random(1))
    assert again["3"]["inputs"]["steps"] == 20 and again["3"]["inputs"]["seed"] != 1
    assert prompt["3"]["inputs"]["seed"] == 1


def effect(flag: str, ratio: float, decided: bool = True, sound: bool = True) -> dict[str, Any]:
    total = {"ratio": ratio, "decided": decided}
    return {"flag": flag, "measures": {"exec_s": total}, "quality": {"sound": sound}}


def test_the_recommendation_takes_the_best_sound_decided_flag_of_each_group() -> None:
    found = [
        effect("--use-sage-attention", 0.85),
        effect("--use-flash-attention", 0.9),
        effect("--fp16-vae", 0.7, sound=False),
        effect("--cache-lru 4", 0.95, decided=False),
        effect("--lowvram", 1.6),
    ]
    assert recommended(["--fp32-vae"], found) == ("--fp32-vae", "--use-sage-attention")
