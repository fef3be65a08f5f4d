"""Per-prompt node progress, as ComfyUI's progress registry reports it in `progress_state`.

The registry keeps every node it has heard of in first-seen order; a `progress_state` frame
lists all of them except pending ones. Value types follow ComfyUI exactly: a started node is
`0.0/1.0` (floats), a sampler step sets the hook's ints, finishing copies `max` into `value`,
and a node finished without having started (a cached output node) is `1/1` (ints).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class NodeState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"


@dataclass
class _Entry:
    state: NodeState
    value: float
    maximum: float


class ProgressRegistry:
    """Progress of the nodes of one prompt."""

    def __init__(self, prompt_id: str) -> None:
        self.prompt_id = prompt_id
        self._nodes: dict[str, _Entry] = {}

    def _entry(self, node_id: str) -> _Entry:
        if node_id not in self._nodes:
            self._nodes[node_id] = _Entry(NodeState.PENDING, 0, 1)
        return self._nodes[node_id]

    def start(self, node_id: str) -> None:
        entry = self._entry(node_id)
        entry.state, entry.value, entry.maximum = NodeState.RUNNING, 0.0, 1.0

    def update(self, node_id: str, value: float, maximum: float) -> None:
        entry = self._entry(node_id)
        entry.state, entry.value, entry.maximum = NodeState.RUNNING, value, maximum

    def finish(self, node_id: str) -> None:
        entry = self._entry(node_id)
        entry.state, entry.value = NodeState.FINISHED, entry.maximum

    def snapshot(self) -> dict[str, Any]:
        """The `nodes` object of a `progress_state` frame (a fresh dict every call)."""
        return {
            node_id: {
                "value": entry.value,
                "max": entry.maximum,
                "state": entry.state.value,
                "node_id": node_id,
                "prompt_id": self.prompt_id,
                "display_node_id": node_id,
                "parent_node_id": None,
                "real_node_id": node_id,
            }
            for node_id, entry in self._nodes.items()
            if entry.state is not NodeState.PENDING
        }
