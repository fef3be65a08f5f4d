"""Prompt validation answers as ComfyUI 0.3.64 does, body for body."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.workers.comfy.prompts import default_graph
from workers.comfy.catalog import Catalog
from workers.comfy.checks import CustomCheck, file_checks
from workers.comfy.validate import validate_prompt

Prompt = dict[str, Any]
STEPS_CONFIG = [
    "INT",
    {
        "default": 20,
        "min": 1,
        "max": 10000,
        "tooltip": "The number of steps used in the denoising process.",
    },
]
CKPT_TOOLTIP = {"tooltip": "The name of the checkpoint (model) to load."}


def only_error(result_node_errors: dict[str, Any], node_id: str) -> dict[str, Any]:
    errors: list[dict[str, Any]] = result_node_errors[node_id]["errors"]
    assert len(errors) == 1
    return errors[0]


# --- prompt-level errors ---------------------------------------------------------------


@pytest.mark.parametrize("prompt", [None, [], ["4"], "prompt", 5, 1.5, True])
def test_a_prompt_that_is_not_an_object_is_refused_without_raising(
    prompt: object, catalog: Catalog
) -> None:
    result = validate_prompt(prompt, catalog)
    assert not result.ok
    assert result.error is not None
    assert result.error["type"] == "invalid_prompt"
    assert set(result.error) == {"type", "message", "details", "extra_info"}
    assert result.node_errors == {}
    assert result.outputs == []


@pytest.mark.parametrize(
    "node",
    [{"inputs": {}}, "text", 5, None, ["CheckpointLoaderSimple"]],
    ids=["no-class-type", "string", "int", "null", "list"],
)
def test_a_node_without_class_type_is_an_invalid_prompt(node: object, catalog: Catalog) -> None:
    prompt = {**default_graph(), "5": node}
    result = validate_prompt(prompt, catalog)
    assert result.response_body() == {
        "error": {
            "type": "invalid_prompt",
            "message": "Cannot execute because a node is missing the class_type property.",
            "details": "Node ID '#5'",
            "extra_info": {},
        },
        "node_errors": {},
    }


def test_an_unknown_class_gives_the_recorded_body(
    catalog: Catalog, transcript: dict[str, Any]
) -> None:
    recorded = transcript["responses"]["post_prompt_unknown_class"]
    prompt = {
        "1": {"class_type": "NoSuchNode", "inputs": {}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}},
    }
    result = validate_prompt(prompt, catalog)
    assert recorded["status"] == 400
    assert result.response_body() == recorded["body"]


def test_validation_stops_at_the_first_bad_node(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["4"]["class_type"] = "NoSuchNode"
    del prompt["5"]["class_type"]
    result = validate_prompt(prompt, catalog)
    assert result.error == {
        "type": "invalid_prompt",
        "message": "Cannot execute because node NoSuchNode does not exist.",
        "details": "Node ID '#4'",
        "extra_info": {},
    }


@pytest.mark.parametrize(
    ("prompt", "targets"),
    [
        ({}, None),
        ({"4": {"class_type": "CheckpointLoaderSimple", "inputs": {}}}, None),
        (default_graph(), ["3", "8"]),
        (default_graph(), []),
        (default_graph(), ["99"]),
    ],
    ids=["empty", "no-output-class", "targets-not-outputs", "no-targets", "unknown-target"],
)
def test_no_output_left_is_prompt_no_outputs(
    prompt: Prompt, targets: list[str] | None, catalog: Catalog
) -> None:
    result = validate_prompt(prompt, catalog, targets)
    assert result.response_body() == {
        "error": {
            "type": "prompt_no_outputs",
            "message": "Prompt has no outputs",
            "details": "",
            "extra_info": {},
        },
        "node_errors": {},
    }


# --- node errors: the recorded bodies ---------------------------------------------------


def test_an_unknown_checkpoint_gives_the_recorded_body(
    catalog: Catalog, transcript: dict[str, Any], txt2img: Prompt
) -> None:
    recorded = transcript["responses"]["post_prompt_invalid"]
    txt2img["4"]["inputs"]["ckpt_name"] = "missing.safetensors"
    result = validate_prompt(txt2img, catalog)
    assert not result.ok
    assert result.response_body() == recorded["body"]


def test_the_protocol_example_with_two_faulty_nodes(catalog: Catalog) -> None:
    tiny = catalog.with_combo_options(
        {("CheckpointLoaderSimple", "ckpt_name"): ["tiny_taesd.safetensors"]}
    )
    prompt = default_graph(steps=0, ckpt="nope.safetensors")
    result = validate_prompt(prompt, tiny)
    assert result.error == {
        "type": "prompt_outputs_failed_validation",
        "message": "Prompt outputs failed validation",
        "details": "",
        "extra_info": {},
    }
    assert result.node_errors == {
        "4": {
            "errors": [
                {
                    "type": "value_not_in_list",
                    "message": "Value not in list",
                    "details": "ckpt_name: 'nope.safetensors' not in ['tiny_taesd.safetensors']",
                    "extra_info": {
                        "input_name": "ckpt_name",
                        "input_config": [["tiny_taesd.safetensors"], CKPT_TOOLTIP],
                        "received_value": "nope.safetensors",
                    },
                }
            ],
            "dependent_outputs": ["9"],
            "class_type": "CheckpointLoaderSimple",
        },
        "3": {
            "errors": [
                {
                    "type": "value_smaller_than_min",
                    "message": "Value 0 smaller than min of 1",
                    "details": "steps",
                    "extra_info": {
                        "input_name": "steps",
                        "input_config": STEPS_CONFIG,
                        "received_value": 0,
                    },
                }
            ],
            "dependent_outputs": ["9"],
            "class_type": "KSampler",
        },
    }


# --- node errors: one per type ----------------------------------------------------------


def _set(node_id: str, name: str, value: Any) -> Callable[[Prompt], None]:
    def mutate(prompt: Prompt) -> None:
        prompt[node_id]["inputs"][name] = value

    return mutate


def _drop(node_id: str, name: str) -> Callable[[Prompt], None]:
    def mutate(prompt: Prompt) -> None:
        del prompt[node_id]["inputs"][name]

    return mutate


SAMPLERS_CONFIG = None  # 42 sampler names: summarised, config left out
SCHEDULERS = [
    "simple",
    "sgm_uniform",
    "karras",
    "exponential",
    "ddim_uniform",
    "beta",
    "normal",
    "linear_quadratic",
    "kl_optimal",
]

NODE_ERROR_CASES: list[tuple[str, Callable[[Prompt], None], str, dict[str, Any]]] = [
    (
        "required_input_missing",
        _drop("3", "steps"),
        "3",
        {
            "type": "required_input_missing",
            "message": "Required input is missing",
            "details": "steps",
            "extra_info": {"input_name": "steps"},
        },
    ),
    (
        "bad_linked_input",
        _set("3", "model", ["4", 0, 1]),
        "3",
        {
            "type": "bad_linked_input",
            "message": "Bad linked input, must be a length-2 list of [node_id, slot_index]",
            "details": "model",
            "extra_info": {
                "input_name": "model",
                "input_config": [
                    "MODEL",
                    {"tooltip": "The model used for denoising the input latent."},
                ],
                "received_value": ["4", 0, 1],
            },
        },
    ),
    (
        "return_type_mismatch",
        _set("3", "model", ["4", 1]),
        "3",
        {
            "type": "return_type_mismatch",
            "message": "Return type mismatch between linked nodes",
            "details": "model, received_type(CLIP) mismatch input_type(MODEL)",
            "extra_info": {
                "input_name": "model",
                "input_config": [
                    "MODEL",
                    {"tooltip": "The model used for denoising the input latent."},
                ],
                "received_type": "CLIP",
                "linked_node": ["4", 1],
            },
        },
    ),
    (
        "invalid_input_type",
        _set("3", "steps", "many"),
        "3",
        {
            "type": "invalid_input_type",
            "message": "Failed to convert an input value to a INT value",
            "details": "steps, many, invalid literal for int() with base 10: 'many'",
            "extra_info": {
                "input_name": "steps",
                "input_config": STEPS_CONFIG,
                "received_value": "many",
                "exception_message": "invalid literal for int() with base 10: 'many'",
            },
        },
    ),
    (
        "value_smaller_than_min",
        _set("3", "steps", 0),
        "3",
        {
            "type": "value_smaller_than_min",
            "message": "Value 0 smaller than min of 1",
            "details": "steps",
            "extra_info": {
                "input_name": "steps",
                "input_config": STEPS_CONFIG,
                "received_value": 0,
            },
        },
    ),
    (
        "value_bigger_than_max",
        _set("3", "steps", "10001"),
        "3",
        {
            "type": "value_bigger_than_max",
            "message": "Value 10001 bigger than max of 10000",
            "details": "steps",
            "extra_info": {
                "input_name": "steps",
                "input_config": STEPS_CONFIG,
                "received_value": 10001,
            },
        },
    ),
    (
        "value_not_in_short_list",
        _set("3", "scheduler", "fast"),
        "3",
        {
            "type": "value_not_in_list",
            "message": "Value not in list",
            "details": f"scheduler: 'fast' not in {SCHEDULERS}",
            "extra_info": {
                "input_name": "scheduler",
                "input_config": [
                    SCHEDULERS,
                    {
                        "tooltip": "The scheduler controls how noise is gradually removed "
                        "to form the image."
                    },
                ],
                "received_value": "fast",
            },
        },
    ),
    (
        "value_not_in_long_list",
        _set("3", "sampler_name", "magic"),
        "3",
        {
            "type": "value_not_in_list",
            "message": "Value not in list",
            "details": "sampler_name: 'magic' not in (list of length 42)",
            "extra_info": {
                "input_name": "sampler_name",
                "input_config": None,
                "received_value": "magic",
            },
        },
    ),
    (
        "exception_during_inner_validation",
        _set("8", "samples", ["99", 0]),
        "8",
        {
            "type": "exception_during_inner_validation",
            "message": "Exception when validating inner node",
            "details": "'99'",
            "extra_info": {
                "input_name": "images",
                "input_config": ["IMAGE", {"tooltip": "The images to save."}],
                "exception_message": "'99'",
                "exception_type": "KeyError",
                "traceback": [],
                "linked_node": ["8", 0],
            },
        },
    ),
    (
        "inner_exception_from_a_bad_output_index",
        _set("8", "samples", ["3", 5]),
        "8",
        {
            "type": "exception_during_inner_validation",
            "message": "Exception when validating inner node",
            "details": "tuple index out of range",
            "extra_info": {
                "input_name": "images",
                "input_config": ["IMAGE", {"tooltip": "The images to save."}],
                "exception_message": "tuple index out of range",
                "exception_type": "IndexError",
                "traceback": [],
                "linked_node": ["8", 0],
            },
        },
    ),
]


@pytest.mark.parametrize(
    ("mutate", "node_id", "expected"),
    [case[1:] for case in NODE_ERROR_CASES],
    ids=[case[0] for case in NODE_ERROR_CASES],
)
def test_each_input_fault_is_reported_on_its_own_node(
    mutate: Callable[[Prompt], None],
    node_id: str,
    expected: dict[str, Any],
    catalog: Catalog,
) -> None:
    prompt = default_graph()
    mutate(prompt)
    result = validate_prompt(prompt, catalog)
    assert not result.ok
    assert result.error is not None
    assert result.error["type"] == "prompt_outputs_failed_validation"
    assert result.error["details"] == ""
    assert list(result.node_errors) == [node_id]
    assert result.node_errors[node_id]["class_type"] == prompt[node_id]["class_type"]
    assert result.node_errors[node_id]["dependent_outputs"] == ["9"]
    assert only_error(result.node_errors, node_id) == expected


@pytest.mark.parametrize(
    ("mutate", "details"),
    [
        (_drop("9", "images"), "Required input is missing: images"),
        (_set("9", "images", ["99", 0]), "Exception when validating node: '99'"),
        (
            _set("9", "images", ["4", 0]),
            "Return type mismatch between linked nodes: "
            "images, received_type(MODEL) mismatch input_type(IMAGE)",
        ),
    ],
    ids=["missing", "exception", "mismatch"],
)
def test_errors_on_the_output_node_itself_go_into_details(
    mutate: Callable[[Prompt], None], details: str, catalog: Catalog
) -> None:
    prompt = default_graph()
    mutate(prompt)
    result = validate_prompt(prompt, catalog)
    assert result.error is not None
    assert result.error["details"] == details
    assert list(result.node_errors) == ["9"]


def test_an_exception_on_the_output_node_has_comfyui_shape(catalog: Catalog) -> None:
    prompt = default_graph()
    del prompt["9"]["inputs"]
    result = validate_prompt(prompt, catalog)
    assert result.node_errors["9"]["errors"] == [
        {
            "type": "exception_during_validation",
            "message": "Exception when validating node",
            "details": "'inputs'",
            "extra_info": {"exception_type": "KeyError", "traceback": []},
        }
    ]


def test_a_node_with_several_faults_lists_them_in_input_order(catalog: Catalog) -> None:
    prompt = default_graph(steps=0)
    prompt["3"]["inputs"]["scheduler"] = "fast"
    del prompt["3"]["inputs"]["seed"]
    result = validate_prompt(prompt, catalog)
    kinds = [(e["type"], e["extra_info"]["input_name"]) for e in result.node_errors["3"]["errors"]]
    assert kinds == [
        ("required_input_missing", "seed"),
        ("value_smaller_than_min", "steps"),
        ("value_not_in_list", "scheduler"),
    ]


def test_nodes_invalid_only_because_of_upstream_are_not_listed(catalog: Catalog) -> None:
    prompt = default_graph(ckpt="missing.safetensors")
    result = validate_prompt(prompt, catalog)
    assert list(result.node_errors) == ["4"]


def test_a_cycle_fails_the_output_without_listing_a_node(catalog: Catalog) -> None:
    prompt = {
        "1": {"class_type": "ImageInvert", "inputs": {"image": ["2", 0]}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
    }
    result = validate_prompt(prompt, catalog)
    assert not result.ok
    assert result.error is not None
    assert result.error["type"] == "prompt_outputs_failed_validation"
    assert result.node_errors == {}


# --- accepted prompts -------------------------------------------------------------------


def test_the_recorded_prompt_is_accepted(catalog: Catalog, txt2img: Prompt) -> None:
    result = validate_prompt(txt2img, catalog)
    assert result.ok
    assert result.error is None
    assert result.node_errors == {}
    assert result.outputs == ["9"]


COERCIONS: list[tuple[str, str, Any, Any]] = [
    ("3", "cfg", 7, 7.0),
    ("3", "cfg", "7.5", 7.5),
    ("3", "steps", "20", 20),
    ("3", "steps", 20.9, 20),
    ("3", "seed", True, 1),
    ("6", "text", 5, "5"),
    ("6", "text", {"__value__": ["a", "b"]}, "['a', 'b']"),
    ("3", "sampler_name", {"__value__": "euler"}, "euler"),
]


@pytest.mark.parametrize(("node_id", "name", "sent", "coerced"), COERCIONS)
def test_constants_are_coerced_as_comfyui_does(
    node_id: str, name: str, sent: Any, coerced: Any, catalog: Catalog
) -> None:
    prompt = default_graph()
    prompt[node_id]["inputs"][name] = sent
    original = copy.deepcopy(prompt)
    result = validate_prompt(prompt, catalog)
    assert result.ok
    value = result.prompt[node_id]["inputs"][name]
    assert value == coerced
    assert type(value) is type(coerced)
    assert prompt == original


def test_booleans_are_coerced_with_python_truth(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["20"] = {
        "class_type": "InpaintModelConditioning",
        "inputs": {
            "positive": ["6", 0],
            "negative": ["7", 0],
            "vae": ["4", 2],
            "pixels": ["8", 0],
            "mask": ["21", 1],
            "noise_mask": "false",
        },
    }
    prompt["21"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    prompt["22"] = {"class_type": "PreviewAny", "inputs": {"source": ["20", 0]}}
    result = validate_prompt(prompt, catalog)
    assert result.ok
    assert result.prompt["20"]["inputs"]["noise_mask"] is True


def test_nodes_no_output_needs_are_left_unvalidated_and_uncoerced(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["30"] = {"class_type": "KSampler", "inputs": {"cfg": 7, "steps": 0}}
    result = validate_prompt(prompt, catalog)
    assert result.ok
    assert result.node_errors == {}
    assert result.prompt["30"]["inputs"]["cfg"] == 7
    assert type(result.prompt["30"]["inputs"]["cfg"]) is int


def test_undeclared_and_missing_optional_inputs_are_fine(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["9"]["inputs"]["unknown_extra"] = [1, 2, 3]
    prompt["9"]["_meta"] = {"title": "Save"}
    assert validate_prompt(prompt, catalog).ok


def test_any_type_inputs_accept_every_link(catalog: Catalog) -> None:
    prompt = default_graph()
    prompt["10"] = {"class_type": "PreviewAny", "inputs": {"source": ["4", 0]}}
    assert validate_prompt(prompt, catalog).outputs == ["9", "10"]


# --- several outputs --------------------------------------------------------------------


def _with_second_output(prompt: Prompt, *, broken: bool) -> Prompt:
    vae = {} if broken else {"vae": ["4", 2]}
    prompt["12"] = {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], **vae}}
    prompt["10"] = {"class_type": "PreviewImage", "inputs": {"images": ["12", 0]}}
    return prompt


def test_partial_success_queues_only_the_good_outputs(catalog: Catalog) -> None:
    prompt = _with_second_output(default_graph(), broken=True)
    result = validate_prompt(prompt, catalog)
    assert result.ok
    assert result.error is None
    assert result.outputs == ["9"]
    assert result.node_errors == {
        "12": {
            "errors": [
                {
                    "type": "required_input_missing",
                    "message": "Required input is missing",
                    "details": "vae",
                    "extra_info": {"input_name": "vae"},
                }
            ],
            "dependent_outputs": ["10"],
            "class_type": "VAEDecode",
        }
    }


def test_partial_execution_targets_limit_what_is_validated(catalog: Catalog) -> None:
    prompt = _with_second_output(default_graph(), broken=True)
    result = validate_prompt(prompt, catalog, ["9"])
    assert result.ok
    assert result.outputs == ["9"]
    assert result.node_errors == {}
    assert validate_prompt(prompt, catalog, ["10"]).ok is False


def test_a_shared_faulty_node_lists_every_output_it_breaks(catalog: Catalog) -> None:
    prompt = _with_second_output(default_graph(steps=0), broken=False)
    result = validate_prompt(prompt, catalog)
    assert not result.ok
    assert result.node_errors["3"]["dependent_outputs"] == ["9", "10"]


def test_a_failed_node_is_credited_to_every_later_failing_output(catalog: Catalog) -> None:
    # ComfyUI walks every node validated so far for each failing output, so node 3 (broken
    # for output 9) is also credited to output 10, which fails for its own reason.
    prompt = _with_second_output(default_graph(steps=0), broken=True)
    prompt["10"]["inputs"]["images"] = ["12", 0]
    prompt["12"]["inputs"] = {"samples": ["5", 0]}
    result = validate_prompt(prompt, catalog)
    assert result.node_errors["3"]["dependent_outputs"] == ["9", "10"]
    assert result.node_errors["12"]["dependent_outputs"] == ["10"]


# --- VALIDATE_INPUTS stand-ins ----------------------------------------------------------


def _load_image_graph(image: Any) -> Prompt:
    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": image}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
    }


def test_file_checks_replace_the_combo_check(catalog: Catalog) -> None:
    checks = file_checks(lambda name: name in {"uploaded.png", "a.png [output]"})
    for name in ("uploaded.png", "a.png [output]"):
        assert validate_prompt(_load_image_graph(name), catalog, custom_checks=checks).ok
    result = validate_prompt(_load_image_graph("example.png"), catalog, custom_checks=checks)
    assert only_error(result.node_errors, "1") == {
        "type": "custom_validation_failed",
        "message": "Custom validation failed for node",
        "details": "image - Invalid image file: example.png",
        "extra_info": {"input_name": "image"},
    }


def test_without_file_checks_the_image_list_is_checked(catalog: Catalog) -> None:
    assert validate_prompt(_load_image_graph("example.png"), catalog).ok
    result = validate_prompt(_load_image_graph("uploaded.png"), catalog)
    assert only_error(result.node_errors, "1")["type"] == "value_not_in_list"


def test_a_missing_file_input_is_an_exception_as_in_comfyui(catalog: Catalog) -> None:
    prompt = _load_image_graph("x.png")
    del prompt["1"]["inputs"]["image"]
    result = validate_prompt(prompt, catalog, custom_checks=file_checks(lambda _: True))
    error = only_error(result.node_errors, "1")
    assert error["type"] == "exception_during_inner_validation"
    assert error["details"] == (
        "LoadImage.VALIDATE_INPUTS() missing 1 required positional argument: 'image'"
    )


def test_a_custom_check_returning_false_names_only_the_input(catalog: Catalog) -> None:
    checks = {"KSampler": CustomCheck(frozenset({"steps"}), lambda values: values["steps"] > 5)}
    assert validate_prompt(default_graph(steps=6), catalog, custom_checks=checks).ok
    result = validate_prompt(default_graph(steps=0), catalog, custom_checks=checks)
    assert only_error(result.node_errors, "3") == {
        "type": "custom_validation_failed",
        "message": "Custom validation failed for node",
        "details": "steps",
        "extra_info": {"input_name": "steps"},
    }


def test_chains_deeper_than_the_stack_validate_as_in_comfyui(catalog: Catalog) -> None:
    prompt: Prompt = {"0": {"class_type": "LoadImage", "inputs": {"image": "example.png"}}}
    for index in range(1, 600):
        prompt[str(index)] = {"class_type": "ImageInvert", "inputs": {"image": [str(index - 1), 0]}}
    prompt["out"] = {"class_type": "PreviewImage", "inputs": {"images": ["599", 0]}}
    assert validate_prompt(prompt, catalog).ok
    prompt["0"]["inputs"]["image"] = "missing.png"
    result = validate_prompt(prompt, catalog)
    assert list(result.node_errors) == ["0"]
    assert result.node_errors["0"]["dependent_outputs"] == ["out"]


def test_a_merged_catalogue_accepts_any_workers_value(catalog: Catalog) -> None:
    merged = Catalog.merge(
        {
            "gpu0": catalog.with_combo_options(
                {("CheckpointLoaderSimple", "ckpt_name"): ["a.ckpt"]}
            ),
            "gpu1": catalog.with_combo_options(
                {("CheckpointLoaderSimple", "ckpt_name"): ["b.ckpt"]}
            ),
        }
    )
    assert validate_prompt(default_graph(ckpt="b.ckpt"), merged).ok
    result = validate_prompt(default_graph(ckpt="c.ckpt"), merged)
    assert only_error(result.node_errors, "4")["details"] == (
        "ckpt_name: 'c.ckpt' not in ['a.ckpt', 'b.ckpt']"
    )
