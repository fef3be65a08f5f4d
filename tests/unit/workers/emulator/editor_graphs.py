"""Workflows in the web editor's format turned into the prompts its Run button queues.

What the frontend's `graphToPrompt` does for graphs of core nodes: every active node, its
linked inputs from the links table, its widget values matched in order to the inputs
object_info lists as widgets, with the extra value of a seed's "control after generate"
widget skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

WIDGET_TYPES = frozenset({"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"})
ACTIVE_MODE = 0


def to_prompt(workflow: Mapping[str, Any], object_info: Mapping[str, Any]) -> dict[str, Any]:
    """The API-format prompt of `workflow` (nodes muted or bypassed left out)."""
    sources = {link[0]: [str(link[1]), link[2]] for link in workflow["links"]}
    prompt: dict[str, Any] = {}
    for node in workflow["nodes"]:
        if node.get("mode", ACTIVE_MODE) != ACTIVE_MODE:
            continue
        inputs = dict(widget_inputs(node, object_info[node["type"]]))
        for slot in node.get("inputs", []):
            if slot.get("link") is not None:
                inputs[slot["name"]] = sources[slot["link"]]
        prompt[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return prompt


def widget_inputs(node: Mapping[str, Any], spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each widget input's name and the node's value for it."""
    values = iter(node.get("widgets_values", []))
    for name, options in _declared(spec):
        kind = options[0]
        if not isinstance(kind, list) and kind not in WIDGET_TYPES:
            continue
        value = next(values, None)
        if value is not None:
            yield name, value
        if len(options) > 1 and options[1].get("control_after_generate"):
            next(values, None)


def _declared(spec: Mapping[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    for section in ("required", "optional"):
        declared = spec["input"].get(section, {})
        for name in spec.get("input_order", {}).get(section, list(declared)):
            yield name, declared[name]
