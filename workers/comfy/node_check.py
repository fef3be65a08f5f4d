"""Input validation of one node and, through its links, of everything upstream of it.

Mirrors ComfyUI 0.3.64's `validate_inputs`: results are memoised per node; a node is invalid
when it has errors of its own or an upstream node is invalid (then it lists no error of its
own for that). Exceptions raised while resolving a link (a missing node, a bad output index)
propagate like ComfyUI's, to be reported by the caller one level up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from workers.comfy import errors
from workers.comfy.catalog import Catalog, InputSpec
from workers.comfy.checks import CustomCheck
from workers.comfy.errors import ErrorBody
from workers.comfy.graph import is_link

Result = tuple[bool, list[ErrorBody]]
Converter = Callable[[Any], Any]

DEEP_CHAIN = 100


def finite_float(value: Any) -> float:
    """ComfyUI's `float(value)`, refusing NaN and the infinities (`"nan"`, `"inf"`): JSON has
    no such numbers, so such a prompt could not be sent on to a worker."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"could not convert {value!r} to a finite float")
    return number


CONVERSIONS: Mapping[str, Converter] = {
    "INT": int,
    "FLOAT": finite_float,
    "STRING": str,
    "BOOLEAN": bool,
}


def types_match(received: Any, declared: Any) -> bool:
    """Whether an output of type `received` may feed an input declared `declared`.

    Equal types match; "T1,T2" lists match when they share a type; "*" matches anything
    (ComfyUI's IO.ANY and v3 types compare that way; a plain "*" string of a classic custom
    node would not, which object_info cannot tell apart).
    """
    if received == declared:
        return True
    if not isinstance(received, str) or not isinstance(declared, str):
        return False
    if "*" in (received, declared):
        return True
    offered = {part.strip() for part in received.split(",")}
    accepted = {part.strip() for part in declared.split(",")}
    return bool(offered & accepted)


class NodeChecker:
    """Validates nodes of one prompt, coercing constants in place as ComfyUI does."""

    def __init__(
        self,
        prompt: dict[str, Any],
        catalog: Catalog,
        checks: Mapping[str, CustomCheck],
    ) -> None:
        self.prompt = prompt
        self.catalog = catalog
        self.checks = checks
        self.validated: dict[Any, Result] = {}
        self._active: set[Any] = set()

    def validate_output(self, node_id: str) -> Result:
        """`validate` for an output node, also through chains deeper than Python's stack.

        ComfyUI's recursion goes about 1000 links deep; this one takes a few frames per
        link, so past DEEP_CHAIN links the upstream nodes are validated first, deepest
        first, which keeps the recursion short and the verdicts the same (only the order of
        `node_errors` may differ; past ~1000 links ComfyUI fails where this passes).
        """
        if _depth(self.prompt, node_id) > DEEP_CHAIN:
            for upstream in _post_order(self.prompt, node_id):
                try:
                    self.validate(upstream)
                except Exception:
                    continue  # raised again, and reported, from the node that links to it
        return self.validate(node_id)

    def validate(self, node_id: Any) -> Result:
        """`(valid, own_errors)` of the node, validating upstream nodes first. May raise."""
        if node_id in self.validated:
            return self.validated[node_id]
        if node_id in self._active:
            # A cycle: ComfyUI recurses until Python's limit; the error it records is then
            # overwritten as the recursion unwinds, leaving the nodes invalid without errors.
            raise RecursionError("maximum recursion depth exceeded")
        self._active.add(node_id)
        try:
            result = self._validate(node_id)
        finally:
            self._active.discard(node_id)
        self.validated[node_id] = result
        return result

    def _validate(self, node_id: Any) -> Result:
        node = self.prompt[node_id]
        inputs = node["inputs"]
        class_type = node["class_type"]
        check = self.checks.get(class_type)
        taken = check.inputs if check is not None else frozenset()
        own: list[ErrorBody] = []
        upstream_ok = True
        for spec in self.catalog.inputs(class_type):
            if spec.section == "hidden":
                continue
            found, linked_ok = self._check_input(spec, inputs, taken)
            own.extend(found)
            upstream_ok = upstream_ok and linked_ok
        if check is not None:
            own.extend(self._custom(check, class_type, inputs))
        return (upstream_ok and not own, own)

    def _check_input(
        self, spec: InputSpec, inputs: Any, taken: frozenset[str]
    ) -> tuple[list[ErrorBody], bool]:
        if spec.name not in inputs:
            if spec.section == "required":
                return [errors.required_input_missing(spec.name)], True
            return [], True
        value = inputs[spec.name]
        if isinstance(value, list):
            return self._check_link(spec, value)
        return self._check_constant(spec, inputs, taken), True

    def _check_link(self, spec: InputSpec, link: list[Any]) -> tuple[list[ErrorBody], bool]:
        if len(link) != 2:
            return [errors.bad_linked_input(spec.name, spec.input_config, link)], True
        source = link[0]
        received = self.catalog.return_types(self.prompt[source]["class_type"])[link[1]]
        if not types_match(received, spec.declared):
            found = errors.return_type_mismatch(
                spec.name, spec.input_config, received, spec.declared, link
            )
            return [found], True
        try:
            source_ok, _ = self.validate(source)
        except Exception as exc:
            failure = errors.exception_during_inner_validation(
                spec.name, spec.input_config, exc, link
            )
            self.validated[source] = (False, [failure])
            return [], False
        return [], source_ok

    def _check_constant(
        self, spec: InputSpec, inputs: Any, taken: frozenset[str]
    ) -> list[ErrorBody]:
        value = inputs[spec.name]
        try:
            # A list widget value travels wrapped, since a bare list means a link.
            if isinstance(value, dict) and "__value__" in value:
                value = value["__value__"]
                inputs[spec.name] = value
            convert = CONVERSIONS.get(spec.declared) if isinstance(spec.declared, str) else None
            if convert is not None:
                value = convert(value)
                inputs[spec.name] = value
        except Exception as exc:
            return [
                errors.invalid_input_type(spec.name, spec.input_config, spec.declared, value, exc)
            ]
        if spec.name in taken:
            return []
        return _check_bounds(spec, value)

    def _custom(self, check: CustomCheck, class_type: str, inputs: Any) -> list[ErrorBody]:
        declared = {spec.name for spec in self.catalog.inputs(class_type)}
        passed = {
            name: (None if is_link(value) else value)
            for name, value in inputs.items()
            if name in check.inputs and name in declared
        }
        result = check.check(passed)
        if result is True:
            return []
        return [errors.custom_validation_failed(name, result) for name in passed]


def _sources(prompt: Mapping[str, Any], node_id: str) -> list[str]:
    """Ids of the existing nodes this node links to (looking as validation does)."""
    node = prompt.get(node_id)
    inputs = node.get("inputs") if isinstance(node, Mapping) else None
    if not isinstance(inputs, Mapping):
        return []
    return [
        value[0]
        for value in inputs.values()
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
        if value[0] in prompt
    ]


def _post_order(prompt: Mapping[str, Any], start: str) -> list[str]:
    """Upstream nodes of `start`, each after everything it links to (`start` excluded)."""
    order: list[str] = []
    seen = {start}
    stack: list[tuple[str, Iterator[str]]] = [(start, iter(_sources(prompt, start)))]
    while stack:
        node_id, pending = stack[-1]
        source = next(pending, None)
        if source is None:
            stack.pop()
            order.append(node_id)
        elif source not in seen:
            seen.add(source)
            stack.append((source, iter(_sources(prompt, source))))
    return order[:-1]


def _depth(prompt: Mapping[str, Any], start: str) -> int:
    """The longest chain of links upstream of `start` (cycles cut where first met)."""
    depth: dict[str, int] = {}
    for node_id in [*_post_order(prompt, start), start]:
        depth[node_id] = 1 + max((depth.get(s, 0) for s in _sources(prompt, node_id)), default=0)
    return depth[start]


def _check_bounds(spec: InputSpec, value: Any) -> list[ErrorBody]:
    config = spec.config
    if "min" in config and value < config["min"]:
        return [errors.value_smaller_than_min(spec.name, spec.input_config, value, config["min"])]
    if "max" in config and value > config["max"]:
        return [errors.value_bigger_than_max(spec.name, spec.input_config, value, config["max"])]
    declared = spec.declared
    if isinstance(declared, list) and value not in declared:
        return [errors.value_not_in_list(spec.name, spec.input_config, value, declared)]
    return []
