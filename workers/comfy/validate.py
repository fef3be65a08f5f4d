"""Prompt validation with ComfyUI 0.3.64's error types, messages and shapes.

What matches ComfyUI: the order of the checks, every error object, `node_errors` (nodes that
are invalid only because of an upstream node are left out; `dependent_outputs` grows as in
ComfyUI, which also credits a node to later failing outputs), partial success, and the
coercion of constants (only in nodes reachable from an output). What differs: ComfyUI walks
outputs and inputs in set order (random across processes); here outputs follow the prompt's
order and inputs the class's `input_order`. A prompt that is not an object of objects is
refused with `invalid_prompt` where ComfyUI would answer 500. Tracebacks are empty lists.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.comfy import errors
from workers.comfy.catalog import Catalog
from workers.comfy.checks import CustomCheck, file_checks
from workers.comfy.errors import ErrorBody
from workers.comfy.node_check import NodeChecker

__all__ = ["CustomCheck", "Validation", "file_checks", "validate_prompt"]


@dataclass(frozen=True)
class Validation:
    """The outcome of `validate_prompt`.

    `ok`: at least one output passed (ComfyUI answers 200). `error`: the 400 body's "error"
    object when not ok. `node_errors`: ComfyUI's map `{node_id: {"errors",
    "dependent_outputs", "class_type"}}`, possibly non-empty when ok. `outputs`: ids of the
    good output nodes, to execute. `prompt`: a copy of the prompt with constants coerced as
    ComfyUI does (empty when the prompt was not an object).
    """

    ok: bool
    error: ErrorBody | None
    node_errors: dict[str, Any]
    outputs: list[str]
    prompt: dict[str, Any] = field(default_factory=dict)

    def response_body(self) -> dict[str, Any]:
        """The 400 body `{"error", "node_errors"}` (meaningful only when not ok)."""
        return {"error": self.error, "node_errors": self.node_errors}


def validate_prompt(
    prompt: object,
    catalog: Catalog,
    partial_execution_targets: Sequence[str] | None = None,
    *,
    custom_checks: Mapping[str, CustomCheck] | None = None,
) -> Validation:
    """Validate `prompt` (node id -> {"class_type", "inputs"}) as ComfyUI 0.3.64 does.

    `partial_execution_targets` keeps only the output nodes it lists. `custom_checks` maps a
    class_type to its VALIDATE_INPUTS stand-in (see `file_checks`); without one, combo
    inputs are checked against the catalogue's lists. Never raises. The caller's prompt is
    not modified.
    """
    if not isinstance(prompt, Mapping):
        return _refused(errors.not_a_prompt(prompt), {})
    work: dict[str, Any] = copy.deepcopy(dict(prompt))
    problem = _class_problem(work, catalog)
    if problem is not None:
        return _refused(problem, work)
    outputs = _output_ids(work, catalog, partial_execution_targets)
    if not outputs:
        return _refused(errors.no_outputs(), work)
    return _validate_outputs(work, NodeChecker(work, catalog, custom_checks or {}), outputs)


def _refused(error: ErrorBody, work: dict[str, Any]) -> Validation:
    return Validation(ok=False, error=error, node_errors={}, outputs=[], prompt=work)


def _class_problem(work: Mapping[str, Any], catalog: Catalog) -> ErrorBody | None:
    """The first node without a class_type, or with an unknown one."""
    for node_id, node in work.items():
        if not isinstance(node, Mapping) or "class_type" not in node:
            return errors.missing_class_type(node_id)
        if node["class_type"] not in catalog:
            return errors.unknown_class(node_id, node["class_type"])
    return None


def _output_ids(
    work: Mapping[str, Any], catalog: Catalog, targets: Sequence[str] | None
) -> list[str]:
    return [
        node_id
        for node_id, node in work.items()
        if catalog.is_output_node(node["class_type"]) and _targeted(node_id, targets)
    ]


def _targeted(node_id: str, targets: Sequence[str] | None) -> bool:
    if targets is None:
        return True
    try:
        return node_id in targets
    except TypeError:
        return False


def _validate_outputs(work: dict[str, Any], checker: NodeChecker, outputs: list[str]) -> Validation:
    good: list[str] = []
    failed_reasons: list[ErrorBody] = []
    node_errors: dict[str, Any] = {}
    for output in outputs:
        valid, reasons = _validate_output(checker, output)
        if valid:
            good.append(output)
            continue
        failed_reasons.extend(reasons)
        _credit_failure(node_errors, checker, output)
    if not good:
        details = [f"{reason['message']}: {reason['details']}" for reason in failed_reasons]
        return Validation(False, errors.outputs_failed(details), node_errors, [], work)
    return Validation(True, None, node_errors, good, work)


def _validate_output(checker: NodeChecker, output: str) -> tuple[bool, list[ErrorBody]]:
    try:
        return checker.validate_output(output)
    except Exception as exc:
        reasons = [errors.exception_during_validation(exc)]
        checker.validated[output] = (False, reasons)
        return False, reasons


def _credit_failure(node_errors: dict[str, Any], checker: NodeChecker, output: str) -> None:
    # As in ComfyUI, every invalid node seen so far (also while validating earlier outputs)
    # is credited to this output.
    for node_id, (valid, reasons) in checker.validated.items():
        if valid or not reasons:
            continue
        entry = node_errors.setdefault(
            node_id,
            {
                "errors": reasons,
                "dependent_outputs": [],
                "class_type": checker.prompt[node_id]["class_type"],
            },
        )
        entry["dependent_outputs"].append(output)
