"""POST /prompt: what is accepted, every error shape, coercion of values (PROTOCOL.md 1.1, 3.2)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.contract import api, graphs
from tests.contract.graphs import LATENT, LOADER, SAMPLER, SAVE, Prompt
from tests.contract.servers import Server

FAILED = {
    "type": "prompt_outputs_failed_validation",
    "message": "Prompt outputs failed validation",
    "details": "",
    "extra_info": {},
}


def base(checkpoints: list[str]) -> Prompt:
    return graphs.txt2img(checkpoints[0], "never_saved", seed=1)


async def post_invalid(http: httpx.AsyncClient, payload: dict[str, Any]) -> dict[str, Any]:
    response = await http.post("/prompt", json=payload)
    assert response.status_code == 400, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "node_errors"}
    return body


async def test_a_body_without_prompt_is_no_prompt(http: httpx.AsyncClient) -> None:
    body = await post_invalid(http, {"client_id": "x"})
    assert body == {
        "error": {
            "type": "no_prompt",
            "message": "No prompt provided",
            "details": "No prompt provided",
            "extra_info": {},
        },
        "node_errors": {},
    }


async def test_a_node_without_class_type_is_invalid_prompt(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    del prompt[SAVE]["class_type"]
    body = await post_invalid(http, {"prompt": prompt})
    assert body == {
        "error": {
            "type": "invalid_prompt",
            "message": "Cannot execute because a node is missing the class_type property.",
            "details": f"Node ID '#{SAVE}'",
            "extra_info": {},
        },
        "node_errors": {},
    }


async def test_an_unknown_class_type_is_invalid_prompt(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    prompt[SAVE]["class_type"] = "NoSuchNode"
    body = await post_invalid(http, {"prompt": prompt})
    assert body == {
        "error": {
            "type": "invalid_prompt",
            "message": "Cannot execute because node NoSuchNode does not exist.",
            "details": f"Node ID '#{SAVE}'",
            "extra_info": {},
        },
        "node_errors": {},
    }


NO_OUTPUTS = {
    "error": {
        "type": "prompt_no_outputs",
        "message": "Prompt has no outputs",
        "details": "",
        "extra_info": {},
    },
    "node_errors": {},
}


async def test_a_prompt_without_an_output_node_is_prompt_no_outputs(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    del prompt[SAVE]
    assert await post_invalid(http, {"prompt": prompt}) == NO_OUTPUTS


async def test_partial_targets_naming_no_output_node_is_prompt_no_outputs(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    payload = {"prompt": base(checkpoints), "partial_execution_targets": [SAMPLER]}
    assert await post_invalid(http, payload) == NO_OUTPUTS


@dataclass(frozen=True)
class Fault:
    """One way to break the graph, and the error the server must attach to `node`."""

    node: str
    input_name: str
    change: Callable[[Prompt], None]
    error_type: str
    message: str
    details: str | Callable[[list[str]], str]
    extra: dict[str, Any]


def _set(node: str, name: str, value: Any) -> Callable[[Prompt], None]:
    def change(prompt: Prompt) -> None:
        prompt[node]["inputs"][name] = value

    return change


def _drop(node: str, name: str) -> Callable[[Prompt], None]:
    def change(prompt: Prompt) -> None:
        del prompt[node]["inputs"][name]

    return change


def _ckpt_details(checkpoints: list[str]) -> str:
    return f"ckpt_name: 'missing.safetensors' not in {checkpoints!r}"


FAULTS = {
    "value_not_in_list": Fault(
        LOADER,
        "ckpt_name",
        _set(LOADER, "ckpt_name", "missing.safetensors"),
        "value_not_in_list",
        "Value not in list",
        _ckpt_details,
        {"received_value": "missing.safetensors"},
    ),
    "value_smaller_than_min": Fault(
        SAMPLER,
        "steps",
        _set(SAMPLER, "steps", 0),
        "value_smaller_than_min",
        "Value 0 smaller than min of 1",
        "steps",
        {"received_value": 0},
    ),
    "value_bigger_than_max": Fault(
        SAMPLER,
        "cfg",
        _set(SAMPLER, "cfg", 1000),
        "value_bigger_than_max",
        "Value 1000.0 bigger than max of 100.0",
        "cfg",
        {"received_value": 1000.0},
    ),
    "invalid_input_type": Fault(
        SAMPLER,
        "steps",
        _set(SAMPLER, "steps", "abc"),
        "invalid_input_type",
        "Failed to convert an input value to a INT value",
        "steps, abc, invalid literal for int() with base 10: 'abc'",
        {
            "received_value": "abc",
            "exception_message": "invalid literal for int() with base 10: 'abc'",
        },
    ),
    "bad_linked_input": Fault(
        SAMPLER,
        "model",
        _set(SAMPLER, "model", [LOADER, 0, 1]),
        "bad_linked_input",
        "Bad linked input, must be a length-2 list of [node_id, slot_index]",
        "model",
        {"received_value": [LOADER, 0, 1]},
    ),
    "return_type_mismatch": Fault(
        SAMPLER,
        "model",
        _set(SAMPLER, "model", [LATENT, 0]),
        "return_type_mismatch",
        "Return type mismatch between linked nodes",
        "model, received_type(LATENT) mismatch input_type(MODEL)",
        {"received_type": "LATENT", "linked_node": [LATENT, 0]},
    ),
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
async def test_an_invalid_input_fails_validation_with_its_error_under_its_node(
    http: httpx.AsyncClient, checkpoints: list[str], fault: Fault
) -> None:
    prompt = base(checkpoints)
    fault.change(prompt)
    body = await post_invalid(http, {"prompt": prompt})
    assert body["error"] == FAILED
    assert list(body["node_errors"]) == [fault.node]
    node_error = body["node_errors"][fault.node]
    assert node_error["dependent_outputs"] == [SAVE]
    assert node_error["class_type"] == prompt[fault.node]["class_type"]
    [error] = node_error["errors"]
    details = fault.details if isinstance(fault.details, str) else fault.details(checkpoints)
    assert (error["type"], error["message"], error["details"]) == (
        fault.error_type,
        fault.message,
        details,
    )
    info = (await http.get(f"/object_info/{prompt[fault.node]['class_type']}")).json()
    config = next(iter(info.values()))["input"]["required"][fault.input_name]
    assert error["extra_info"] == {
        "input_name": fault.input_name,
        "input_config": config,
        **fault.extra,
    }


async def test_a_missing_required_input_is_required_input_missing(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    _drop(SAMPLER, "seed")(prompt)
    body = await post_invalid(http, {"prompt": prompt})
    assert body["error"] == FAILED
    assert body["node_errors"] == {
        SAMPLER: {
            "errors": [
                {
                    "type": "required_input_missing",
                    "message": "Required input is missing",
                    "details": "seed",
                    "extra_info": {"input_name": "seed"},
                }
            ],
            "dependent_outputs": [SAVE],
            "class_type": "KSampler",
        }
    }


async def test_a_link_to_a_missing_node_fails_validation_of_the_linking_branch(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    prompt[SAMPLER]["inputs"]["model"] = ["99", 0]
    body = await post_invalid(http, {"prompt": prompt})
    assert body["error"] == FAILED
    # ComfyUI raises KeyError inside the sampler's validation and reports it under the sampler,
    # as seen by its consumer (the decoder).
    [node] = body["node_errors"]
    [error] = body["node_errors"][node]["errors"]
    assert error["type"] == "exception_during_inner_validation"
    assert error["details"] == "'99'"
    assert body["node_errors"][node]["dependent_outputs"] == [SAVE]


async def test_several_faulty_nodes_are_all_reported(
    http: httpx.AsyncClient, checkpoints: list[str]
) -> None:
    prompt = base(checkpoints)
    prompt[LOADER]["inputs"]["ckpt_name"] = "missing.safetensors"
    prompt[SAMPLER]["inputs"]["steps"] = 0
    body = await post_invalid(http, {"prompt": prompt})
    assert set(body["node_errors"]) == {LOADER, SAMPLER}
    assert body["node_errors"][LOADER]["errors"][0]["type"] == "value_not_in_list"
    assert body["node_errors"][SAMPLER]["errors"][0]["type"] == "value_smaller_than_min"


async def test_a_body_that_is_not_json_is_a_500(server: Server, http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/prompt", content=b"{not json", headers={"content-type": "application/json"}
    )
    if server.gateway:
        # By design: a malformed body is the client's fault, and a gateway says so.
        assert response.status_code == 400
        body = response.json()
        assert body["error"]["type"] == "invalid_json"
        assert body["node_errors"] == {}
        return
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "500 Internal Server Error\n\nServer got itself in trouble"


async def test_one_valid_output_is_queued_with_the_others_errors_on_200(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.with_second_output(
        graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()), width=0, prefix=prefix
    )
    body = await api.submit(http, prompt)
    assert set(body) == {"prompt_id", "number", "node_errors"}
    assert list(body["node_errors"]) == ["12"]
    node_error = body["node_errors"]["12"]
    assert node_error["dependent_outputs"] == ["10"]
    assert node_error["class_type"] == "EmptyLatentImage"
    assert [e["type"] for e in node_error["errors"]] == ["value_smaller_than_min"]
    entry = await api.wait_history(http, body["prompt_id"])
    assert entry["prompt"][4] == [SAVE]
    assert list(entry["outputs"]) == [SAVE]


async def test_partial_targets_run_only_the_named_outputs(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.with_second_output(
        graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed()), width=64, prefix=prefix
    )
    body = await api.submit(http, prompt, partial_execution_targets=["10"])
    assert body["node_errors"] == {}
    entry = await api.wait_history(http, body["prompt_id"])
    assert entry["prompt"][4] == ["10"]
    assert list(entry["outputs"]) == ["10"]


async def test_values_are_coerced_to_their_declared_types_in_history(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt = graphs.txt2img(checkpoints[0], prefix, seed=api.fresh_seed())
    prompt[SAMPLER]["inputs"].update(cfg=7, steps="1", denoise=1)
    entry = await api.run(http, copy.deepcopy(prompt))
    inputs = entry["prompt"][2][SAMPLER]["inputs"]
    assert inputs["cfg"] == 7.0
    assert isinstance(inputs["cfg"], float)
    assert inputs["steps"] == 1
    assert isinstance(inputs["steps"], int)
    assert isinstance(inputs["denoise"], float)


async def test_a_given_prompt_id_is_used_verbatim(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    prompt_id = f"contract-{uuid.uuid4().hex}"
    body = await api.submit(
        http, graphs.txt2img(checkpoints[0], prefix, seed=1), prompt_id=prompt_id
    )
    assert body["prompt_id"] == prompt_id
    entry = await api.wait_history(http, prompt_id)
    assert entry["prompt"][1] == prompt_id


async def test_a_missing_prompt_id_becomes_a_hyphenated_uuid4(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    body = await api.submit(http, graphs.txt2img(checkpoints[0], prefix, seed=1))
    assert str(uuid.UUID(body["prompt_id"], version=4)) == body["prompt_id"]
    assert isinstance(body["number"], int)
    await api.wait_history(http, body["prompt_id"])


async def test_client_id_and_extra_data_are_kept_in_history(
    http: httpx.AsyncClient, checkpoints: list[str], prefix: str
) -> None:
    extra = {"extra_pnginfo": {"workflow": {"nodes": []}}, "client_id": "overridden"}
    entry = await api.run(
        http,
        graphs.txt2img(checkpoints[0], prefix, seed=1),
        client_id="contract-client",
        extra_data=extra,
    )
    assert entry["prompt"][3] == {
        "extra_pnginfo": {"workflow": {"nodes": []}},
        "client_id": "contract-client",
    }
