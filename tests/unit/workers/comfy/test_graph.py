"""Execution order and cache signatures follow ComfyUI 0.3.64."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.workers.comfy.prompts import default_graph
from workers.comfy.catalog import Catalog
from workers.comfy.graph import ancestors, execution_order, is_link, node_signatures

Prompt = dict[str, Any]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["4", 0], True),
        (["4", 1.0], True),
        (["4", True], True),
        ([4, 0], False),
        (["4", "0"], False),
        (["4", 0, 1], False),
        ("4", False),
        ({"__value__": ["4", 0]}, False),
    ],
)
def test_is_link_recognises_only_id_index_pairs(value: object, expected: bool) -> None:
    assert is_link(value) is expected


# --- execution order --------------------------------------------------------------------


def test_order_matches_the_recorded_run(
    catalog: Catalog, txt2img: Prompt, transcript: dict[str, Any]
) -> None:
    executed = [
        message["msg"]["data"]["node"]
        for message in transcript["ws"]
        if message["msg"]["type"] == "executing" and message["msg"]["data"]["node"] is not None
    ]
    assert executed == ["4", "5", "7", "6", "3", "8", "9"]
    assert execution_order(txt2img, ["9"], catalog) == executed


def test_order_of_the_default_graph_with_sorted_inputs(catalog: Catalog) -> None:
    assert execution_order(default_graph(), ["9"], catalog) == ["4", "6", "7", "5", "3", "8", "9"]


def test_order_without_catalogue_takes_the_given_outputs_as_output_nodes(txt2img: Prompt) -> None:
    assert execution_order(txt2img, ["9"]) == ["4", "5", "7", "6", "3", "8", "9"]


@pytest.mark.parametrize(
    ("cached", "expected"),
    [
        ({"4", "5", "6", "7"}, ["3", "8", "9"]),
        ({"4", "5", "6", "7", "3", "8"}, ["9"]),
        ({"4", "5", "6", "7", "3", "8", "9"}, ["9"]),
        ({"3"}, ["4", "8", "9"]),
    ],
    ids=["new-seed", "all-but-output", "identical", "sampler-only"],
)
def test_cached_nodes_are_skipped_but_outputs_always_staged(
    catalog: Catalog, txt2img: Prompt, cached: set[str], expected: list[str]
) -> None:
    assert execution_order(txt2img, ["9"], catalog, cached=cached) == expected


def test_only_the_outputs_and_their_ancestors_run(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["20"] = {
        "class_type": "CheckpointLoaderSimple",
        "inputs": {"ckpt_name": "B.safetensors"},
    }
    prompt["21"] = {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}
    assert execution_order(prompt, ["9"], catalog) == ["4", "6", "7", "5", "3", "8", "9"]


def test_a_ready_output_runs_before_other_ready_nodes(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["10"] = {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}
    prompt["11"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    prompt["12"] = {"class_type": "SaveImage", "inputs": {"images": ["11", 0]}}
    order = execution_order(prompt, ["9", "10", "12"], catalog)
    assert order == ["11", "12", "4", "6", "7", "5", "3", "8", "9", "10"]


def test_a_cycle_ends_the_order_early(catalog: Catalog) -> None:
    prompt = {
        "1": {"class_type": "ImageInvert", "inputs": {"image": ["2", 0]}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}},
    }
    assert execution_order(prompt, ["3"], catalog) == []


def test_ancestors_follow_links_only(txt2img: Prompt) -> None:
    assert ancestors(txt2img, "8") == {"3", "4", "5", "6", "7"}
    assert ancestors(txt2img, "4") == set()


# --- cache signatures -------------------------------------------------------------------


def _renumbered(prompt: Prompt, offset: int) -> Prompt:
    def new_id(node_id: str) -> str:
        return str(int(node_id) + offset)

    def new_value(value: Any) -> Any:
        return [new_id(value[0]), value[1]] if is_link(value) else value

    return {
        new_id(node_id): {
            "class_type": node["class_type"],
            "inputs": {name: new_value(v) for name, v in reversed(node["inputs"].items())},
        }
        for node_id, node in prompt.items()
    }


def test_the_same_graph_under_other_ids_has_the_same_keys(catalog: Catalog) -> None:
    before = node_signatures(default_graph(), catalog)
    after = node_signatures(_renumbered(default_graph(), 100), catalog)
    assert {before[node_id] == after[str(int(node_id) + 100)] for node_id in before} == {True}


def test_a_new_seed_changes_only_the_sampler_and_what_follows(catalog: Catalog) -> None:
    before = node_signatures(default_graph(seed=1), catalog)
    after = node_signatures(default_graph(seed=2), catalog)
    changed = {node_id for node_id in before if before[node_id] != after[node_id]}
    assert changed == {"3", "8", "9"}


def test_another_checkpoint_changes_everything_downstream(catalog: Catalog) -> None:
    before = node_signatures(default_graph(), catalog)
    after = node_signatures(default_graph(ckpt="B.safetensors"), catalog)
    changed = {node_id for node_id in before if before[node_id] != after[node_id]}
    assert changed == {"3", "4", "6", "7", "8", "9"}


def test_keys_tell_inputs_apart_beyond_values(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["7"]["inputs"]["text"] = "a cat"
    keys = node_signatures(prompt, catalog)
    assert keys["6"] == keys["7"]
    prompt["3"]["inputs"]["negative"], prompt["3"]["inputs"]["positive"] = ["6", 0], ["7", 0]
    assert node_signatures(prompt, catalog)["3"] == keys["3"]
    prompt["3"]["inputs"]["positive"] = ["4", 0]
    assert node_signatures(prompt, catalog)["3"] != keys["3"]


def test_classic_unique_id_classes_are_keyed_by_node_id(catalog: Catalog) -> None:
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "2": {"class_type": "GetImageSize", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "GetImageSize", "inputs": {"image": ["1", 0]}},
        "4": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "5": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
    }
    keys = node_signatures(prompt, catalog)
    assert keys["2"] != keys["3"]
    assert keys["4"] == keys["5"]


def test_v3_hidden_unique_id_does_not_key_by_node_id(catalog: Catalog) -> None:
    # v3 classes list hidden inputs as ["UNIQUE_ID"]; ComfyUI's check misses those.
    assert catalog.hidden_values("IdeogramV1")[-1] == ["UNIQUE_ID"]
    prompt = {
        "1": {"class_type": "IdeogramV1", "inputs": {"prompt": "x"}},
        "2": {"class_type": "IdeogramV1", "inputs": {"prompt": "x"}},
    }
    keys = node_signatures(prompt, catalog)
    assert keys["1"] == keys["2"]


def test_is_changed_results_enter_the_key(catalog: Catalog, txt2img: Prompt) -> None:
    def image_hash(node_id: str, node: Any) -> object:
        return "hash-of-" + node_id if node_id == "4" else False

    plain = node_signatures(txt2img, catalog)
    hashed = node_signatures(txt2img, catalog, image_hash)
    assert plain["5"] == hashed["5"]
    assert plain["4"] != hashed["4"]
    assert plain["9"] != hashed["9"]


def test_a_link_to_a_missing_node_is_never_a_hit(catalog: Catalog) -> None:
    prompt = {"1": {"class_type": "ImageInvert", "inputs": {"image": ["99", 0]}}}
    assert node_signatures(prompt, catalog)["1"] != node_signatures(prompt, catalog)["1"]
