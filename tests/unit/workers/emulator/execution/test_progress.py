"""progress_state payloads with ComfyUI's exact value types (seen in the transcript)."""

from __future__ import annotations

from workers.emulator.execution.progress import ProgressRegistry


def values(registry: ProgressRegistry) -> dict[str, tuple[object, object, str]]:
    return {n: (e["value"], e["max"], e["state"]) for n, e in registry.snapshot().items()}


def test_value_types_follow_comfyui() -> None:
    registry = ProgressRegistry("p")
    registry.start("4")
    assert values(registry) == {"4": (0.0, 1.0, "running")}
    registry.finish("4")
    registry.start("3")
    registry.update("3", 1, 20)
    registry.finish("3")
    registry.finish("9")  # a cached output node: never started
    snapshot = registry.snapshot()
    assert values(registry) == {
        "4": (1.0, 1.0, "finished"),
        "3": (20, 20, "finished"),
        "9": (1, 1, "finished"),
    }
    assert type(snapshot["4"]["value"]) is float
    assert type(snapshot["3"]["max"]) is int
    assert type(snapshot["9"]["value"]) is int
    assert list(snapshot) == ["4", "3", "9"]
    assert snapshot["9"] == {
        "value": 1,
        "max": 1,
        "state": "finished",
        "node_id": "9",
        "prompt_id": "p",
        "display_node_id": "9",
        "parent_node_id": None,
        "real_node_id": "9",
    }
