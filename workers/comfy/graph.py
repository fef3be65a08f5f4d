"""Graph logic over a prompt: links, execution order and cache signatures."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from typing import Any, TypeGuard

from workers.comfy.catalog import Catalog

Prompt = Mapping[str, Mapping[str, Any]]
IsChanged = Callable[[str, Mapping[str, Any]], Any]


def is_link(value: object) -> TypeGuard[list[Any]]:
    """True for a link `[source_node_id, output_index]` as ComfyUI's graph code sees one.

    (Validation is looser: there any 2-list is taken for a link.)
    """
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int | float)
    )


def node_inputs(prompt: Prompt, node_id: str) -> Mapping[str, Any]:
    """The node's inputs, empty when the node or its inputs are missing or malformed."""
    node = prompt.get(node_id)
    inputs = node.get("inputs") if isinstance(node, Mapping) else None
    return inputs if isinstance(inputs, Mapping) else {}


def links(prompt: Prompt, node_id: str) -> Iterator[tuple[str, str, int | float]]:
    """`(input_name, source_node_id, output_index)` for each linked input, in input order."""
    for name, value in node_inputs(prompt, node_id).items():
        if is_link(value):
            yield name, value[0], value[1]


def ancestors(prompt: Prompt, node_id: str) -> set[str]:
    """Every node the given node depends on through links (itself excluded)."""
    seen: set[str] = set()
    stack = [node_id]
    while stack:
        for _, source, _ in links(prompt, stack.pop()):
            if source not in seen and source != node_id:
                seen.add(source)
                stack.append(source)
    return seen


def execution_order(
    prompt: Prompt,
    outputs: Iterable[str],
    catalog: Catalog | None = None,
    *,
    cached: Collection[str] = (),
) -> list[str]:
    """Node ids in the order ComfyUI 0.3.64's ExecutionList runs them.

    Only `outputs` and their ancestors appear; nodes in `cached` (and what only they need)
    are skipped, except output nodes, which ComfyUI always stages. With a catalogue, output
    nodes and API nodes (run early, as ComfyUI does with async nodes) are known from it;
    without, only the given `outputs` count as output nodes. A cycle ends the list early.
    For the default txt2img graph this is 4, 6, 7, 5, 3, 8, 9 (or 4, 5, 7, 6, ... when
    KSampler lists its inputs in another order: ties follow the prompt's input order).
    """
    targets = list(outputs)
    plan = _Plan(prompt, frozenset(cached))
    for output in targets:
        plan.add(output)
    picker = _Picker(prompt, catalog, frozenset(targets), plan.blocking)
    order: list[str] = []
    while plan.pending:
        ready = [node for node in plan.pending if plan.block_count[node] == 0]
        if not ready:
            break
        node = picker.pick(ready)
        plan.pop(node)
        order.append(node)
    return order


class _Plan:
    """Pending nodes, how many pending nodes each waits for, and whom each blocks."""

    def __init__(self, prompt: Prompt, cached: frozenset[str]) -> None:
        self.prompt = prompt
        self.cached = cached
        self.pending: dict[str, bool] = {}
        self.block_count: dict[str, int] = {}
        self.blocking: dict[str, dict[str, bool]] = {}

    def add(self, node_id: str) -> None:
        # Depth-first from the end of a stack, links recorded after the walk: the order of
        # `pending` (and so of ties between ready nodes) depends on it.
        stack = [node_id]
        found: list[tuple[str, str]] = []
        while stack:
            current = stack.pop()
            if current in self.pending:
                continue
            self.pending[current] = True
            self.block_count[current] = 0
            self.blocking[current] = {}
            for _, source, _ in links(self.prompt, current):
                if source not in self.cached:
                    stack.append(source)
                    found.append((source, current))
        for source, target in found:
            self._link(source, target)

    def _link(self, source: str, target: str) -> None:
        self.add(source)
        if target not in self.blocking[source]:
            self.blocking[source][target] = True
            self.block_count[target] += 1

    def pop(self, node_id: str) -> None:
        del self.pending[node_id]
        for target in self.blocking[node_id]:
            self.block_count[target] -= 1
        del self.blocking[node_id]


class _Picker:
    """ComfyUI's choice among ready nodes: outputs first, then what feeds them soonest."""

    def __init__(
        self,
        prompt: Prompt,
        catalog: Catalog | None,
        outputs: frozenset[str],
        blocking: Mapping[str, Mapping[str, bool]],
    ) -> None:
        self.prompt = prompt
        self.catalog = catalog
        self.outputs = outputs
        self.blocking = blocking

    def pick(self, ready: list[str]) -> str:
        for node in ready:
            if self._is_output(node) or self._is_async(node):
                return node
        for node in ready:
            if any(self._is_output(target) for target in self.blocking[node]):
                return node
        for node in ready:
            for target in self.blocking[node]:
                if any(self._is_output(after) for after in self.blocking.get(target, {})):
                    return node
        return ready[0]

    def _class_type(self, node_id: str) -> str:
        node = self.prompt.get(node_id)
        class_type = node.get("class_type") if isinstance(node, Mapping) else None
        return class_type if isinstance(class_type, str) else ""

    def _is_output(self, node_id: str) -> bool:
        if self.catalog is None:
            return node_id in self.outputs
        return self.catalog.is_output_node(self._class_type(node_id))

    def _is_async(self, node_id: str) -> bool:
        return self.catalog is not None and self.catalog.is_api_node(self._class_type(node_id))


class _Uncacheable:
    """Stands for a value that can never match another (ComfyUI uses NaN or an object)."""

    __slots__ = ()


def _not_changed(node_id: str, node: Mapping[str, Any]) -> Any:
    return False


def node_signatures(
    prompt: Prompt, catalog: Catalog, is_changed: IsChanged | None = None
) -> dict[str, Hashable]:
    """Each node's cache key, as ComfyUI's input-signature cache computes it.

    The key covers the node's class type, its IS_CHANGED result, its inputs (constants by
    value, links by the source's place among the ancestors and the output index), then the
    same for every ancestor in a fixed order. The node id is part of it only for classes
    that take a hidden "UNIQUE_ID" (classic nodes; ComfyUI does not see v3 nodes' hidden
    UNIQUE_ID here). NOT_IDEMPOTENT is not in object_info, so it is not honoured.
    `is_changed(node_id, node)` stands in for IS_CHANGED (default: False, i.e. no
    IS_CHANGED). Equal keys mean a cache hit, also across prompts and node ids.
    """
    signer = _Signer(prompt, catalog, is_changed or _not_changed)
    return {node_id: signer.signature(node_id) for node_id in prompt}


class _Signer:
    def __init__(self, prompt: Prompt, catalog: Catalog, is_changed: IsChanged) -> None:
        self.prompt = prompt
        self.catalog = catalog
        self.is_changed = is_changed

    def signature(self, node_id: str) -> Hashable:
        order = self._ancestry(node_id)
        places = {ancestor: index for index, ancestor in enumerate(order)}
        parts = [self._immediate(node_id, places)]
        parts.extend(self._immediate(ancestor, places) for ancestor in order)
        return _hashable(parts)

    def _ancestry(self, node_id: str) -> list[str]:
        # Pre-order walk over inputs sorted by name; each ancestor is listed once, where it
        # is first reached.
        order: list[str] = []
        seen: set[str] = set()
        stack = [self._sorted_sources(node_id)]
        while stack:
            source = next(stack[-1], None)
            if source is None:
                stack.pop()
            elif source not in seen:
                seen.add(source)
                order.append(source)
                stack.append(self._sorted_sources(source))
        return order

    def _sorted_sources(self, node_id: str) -> Iterator[str]:
        inputs = node_inputs(self.prompt, node_id)
        return (inputs[key][0] for key in sorted(inputs) if is_link(inputs[key]))

    def _immediate(self, node_id: str, places: Mapping[str, int]) -> list[Any]:
        node = self.prompt.get(node_id)
        if not isinstance(node, Mapping):
            return [_Uncacheable()]
        class_type = node.get("class_type")
        signature: list[Any] = [class_type, self.is_changed(node_id, node)]
        if "UNIQUE_ID" in self.catalog.hidden_values(str(class_type)):
            signature.append(node_id)
        inputs = node_inputs(self.prompt, node_id)
        for key in sorted(inputs):
            value = inputs[key]
            if is_link(value):
                value = ("ANCESTOR", places[value[0]], value[1])
            signature.append((key, value))
        return signature


def _hashable(value: Any) -> Hashable:
    """A hashable stand-in with the same equality; unknown objects never match anything."""
    if value is None or isinstance(value, int | float | str | _Uncacheable):
        return value
    if isinstance(value, Mapping):
        return frozenset((_hashable(k), _hashable(v)) for k, v in sorted(value.items()))
    if isinstance(value, list | tuple):
        return tuple(_hashable(item) for item in value)
    return _Uncacheable()
