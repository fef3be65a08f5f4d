"""What `POST /prompt` does before queueing: ComfyUI's crash cases, validation, the fault.

ComfyUI 0.3.64 answers 500 (an unhandled exception) for some malformed prompts that the shared
validator refuses more politely (`invalid_prompt`); the emulator must answer as ComfyUI does,
so `check_structure` raises for exactly those cases before the validator runs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from workers.comfy.errors import no_outputs
from workers.comfy.validate import Validation, validate_prompt
from workers.emulator.catalog import NodeCatalog


class MalformedPrompt(TypeError):
    """A prompt on which ComfyUI's validation itself raises (the request gets a 500)."""


def check_structure(prompt: Any, catalog: NodeCatalog) -> Validation | None:
    """Raise where ComfyUI would crash; an early refusal ComfyUI gives; else None.

    ComfyUI iterates the prompt and indexes each node: a non-container prompt, a node that is
    not an object (unless a string or list without "class_type", which reads as "missing
    class_type"), or an unhashable class_type make it raise before any answer is built.
    """
    if not isinstance(prompt, dict):
        if isinstance(prompt, list | str) and len(prompt) == 0:
            return Validation(False, no_outputs(), {}, [], {})
        raise MalformedPrompt(f"prompt of type {type(prompt).__name__}")
    for node_id, node in prompt.items():
        if isinstance(node, str | list):
            if "class_type" in node:
                raise MalformedPrompt(f"node {node_id} is a {type(node).__name__}")
            return None
        if not isinstance(node, dict):
            raise MalformedPrompt(f"node {node_id} is a {type(node).__name__}")
        if "class_type" not in node:
            return None
        class_type = node["class_type"]
        if not isinstance(class_type, Hashable):
            raise MalformedPrompt(f"node {node_id} has an unhashable class_type")
        if class_type not in catalog.validation:
            return None
    return None


def validate(
    prompt: Any, targets: Sequence[str] | None, catalog: NodeCatalog, inject_failure: bool
) -> Validation:
    """ComfyUI's validation of a posted prompt, optionally failed by the fault hook."""
    early = check_structure(prompt, catalog)
    if early is not None:
        return early
    result = validate_prompt(prompt, catalog.validation, targets, custom_checks=catalog.checks())
    if not inject_failure or not result.ok:
        return result
    return injected_failure(result)


def injected_failure(result: Validation) -> Validation:
    """The `fail_validation` fault: the first output fails a custom validation of its own."""
    output = result.outputs[0]
    class_type = result.prompt[output]["class_type"]
    reason = {
        "type": "custom_validation_failed",
        "message": "Custom validation failed for node",
        "details": "fault - injected validation failure",
        "extra_info": {"input_name": "fault", "input_config": None, "received_value": None},
    }
    error = {
        "type": "prompt_outputs_failed_validation",
        "message": "Prompt outputs failed validation",
        "details": f"{reason['message']}: {reason['details']}",
        "extra_info": {},
    }
    node_errors = {
        output: {"errors": [reason], "dependent_outputs": [output], "class_type": class_type}
    }
    return Validation(False, error, node_errors, [], result.prompt)
