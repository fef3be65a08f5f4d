"""ComfyUI prompt logic without ComfyUI: node catalogue, validation, graph order, workflows.

Pure functions over plain JSON data, shared by the emulator (which answers as ComfyUI 0.3.64
would) and the gateway (which validates against the merged catalogue of its workers).
"""

from workers.comfy.catalog import Catalog, InputSpec
from workers.comfy.checks import CustomCheck, file_checks
from workers.comfy.graph import execution_order, is_link, node_signatures
from workers.comfy.validate import Validation, validate_prompt
from workers.comfy.workflow import (
    capable_sources,
    checkpoint,
    model_keys,
    sampler_nodes,
    work_units,
)

__all__ = [
    "Catalog",
    "CustomCheck",
    "InputSpec",
    "Validation",
    "capable_sources",
    "checkpoint",
    "execution_order",
    "file_checks",
    "is_link",
    "model_keys",
    "node_signatures",
    "sampler_nodes",
    "validate_prompt",
    "work_units",
]
