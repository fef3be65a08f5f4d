"""ComfyUI 0.3.64's validation error objects, built field for field.

Every error is `{"type", "message", "details", "extra_info"}`. Prompt-level errors answer the
whole request (`error` of a 400 body); input-level errors are listed per node in
`node_errors`. Python's own `str()` of values and exceptions is part of some texts, as in
ComfyUI.
"""

from __future__ import annotations

from typing import Any

ErrorBody = dict[str, Any]

COMBO_LIST_LIMIT = 20


def _error(kind: str, message: str, details: str, extra: dict[str, Any]) -> ErrorBody:
    return {"type": kind, "message": message, "details": details, "extra_info": extra}


def missing_class_type(node_id: str) -> ErrorBody:
    """A node without `class_type`."""
    return _error(
        "invalid_prompt",
        "Cannot execute because a node is missing the class_type property.",
        f"Node ID '#{node_id}'",
        {},
    )


def unknown_class(node_id: str, class_type: Any) -> ErrorBody:
    """A node whose class is not in the catalogue."""
    return _error(
        "invalid_prompt",
        f"Cannot execute because node {class_type} does not exist.",
        f"Node ID '#{node_id}'",
        {},
    )


def not_a_prompt(received: object) -> ErrorBody:
    """A prompt that is not an object (ComfyUI itself answers 500 here)."""
    return _error(
        "invalid_prompt",
        "Cannot execute because the prompt is not an object of nodes.",
        f"Received {type(received).__name__}",
        {},
    )


def no_outputs() -> ErrorBody:
    """No output node left (after `partial_execution_targets`)."""
    return _error("prompt_no_outputs", "Prompt has no outputs", "", {})


def outputs_failed(details: list[str]) -> ErrorBody:
    """Every output failed; `details` are the "message: details" of the outputs' own errors."""
    return _error(
        "prompt_outputs_failed_validation",
        "Prompt outputs failed validation",
        "\n".join(details),
        {},
    )


def required_input_missing(name: str) -> ErrorBody:
    return _error("required_input_missing", "Required input is missing", name, {"input_name": name})


def bad_linked_input(name: str, config: list[Any], value: Any) -> ErrorBody:
    return _error(
        "bad_linked_input",
        "Bad linked input, must be a length-2 list of [node_id, slot_index]",
        name,
        {"input_name": name, "input_config": config, "received_value": value},
    )


def return_type_mismatch(
    name: str, config: list[Any], received: Any, declared: Any, link: Any
) -> ErrorBody:
    return _error(
        "return_type_mismatch",
        "Return type mismatch between linked nodes",
        f"{name}, received_type({received}) mismatch input_type({declared})",
        {
            "input_name": name,
            "input_config": config,
            "received_type": received,
            "linked_node": link,
        },
    )


def invalid_input_type(
    name: str, config: list[Any], declared: Any, value: Any, exc: Exception
) -> ErrorBody:
    return _error(
        "invalid_input_type",
        f"Failed to convert an input value to a {declared} value",
        f"{name}, {value}, {exc}",
        {
            "input_name": name,
            "input_config": config,
            "received_value": value,
            "exception_message": str(exc),
        },
    )


def value_smaller_than_min(name: str, config: list[Any], value: Any, bound: Any) -> ErrorBody:
    return _error(
        "value_smaller_than_min",
        f"Value {value} smaller than min of {bound}",
        name,
        {"input_name": name, "input_config": config, "received_value": value},
    )


def value_bigger_than_max(name: str, config: list[Any], value: Any, bound: Any) -> ErrorBody:
    return _error(
        "value_bigger_than_max",
        f"Value {value} bigger than max of {bound}",
        name,
        {"input_name": name, "input_config": config, "received_value": value},
    )


def value_not_in_list(name: str, config: list[Any], value: Any, options: list[Any]) -> ErrorBody:
    """Long lists (model folders) are summarised and their `input_config` left out (null)."""
    listed: list[Any] | None = config
    summary = str(options)
    if len(options) > COMBO_LIST_LIMIT:
        summary = f"(list of length {len(options)})"
        listed = None
    return _error(
        "value_not_in_list",
        "Value not in list",
        f"{name}: '{value}' not in {summary}",
        {"input_name": name, "input_config": listed, "received_value": value},
    )


def custom_validation_failed(name: str, result: Any) -> ErrorBody:
    details = name if result is False else f"{name} - {result}"
    return _error(
        "custom_validation_failed",
        "Custom validation failed for node",
        details,
        {"input_name": name},
    )


def exception_during_inner_validation(
    name: str, config: list[Any], exc: BaseException, link: Any
) -> ErrorBody:
    """An exception while validating the node a link comes from (recorded under that node)."""
    return _error(
        "exception_during_inner_validation",
        "Exception when validating inner node",
        str(exc),
        {
            "input_name": name,
            "input_config": config,
            "exception_message": str(exc),
            "exception_type": exception_type(exc),
            "traceback": [],
            "linked_node": link,
        },
    )


def exception_during_validation(exc: BaseException) -> ErrorBody:
    """An exception while validating an output node itself."""
    return _error(
        "exception_during_validation",
        "Exception when validating node",
        str(exc),
        {"exception_type": exception_type(exc), "traceback": []},
    )


def exception_type(exc: BaseException) -> str:
    """The exception's class as ComfyUI names it: bare for builtins, else module-qualified."""
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
