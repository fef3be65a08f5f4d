"""The farm's limit on work per job: a prompt ComfyUI would run for hours is refused at intake.

Work units are ComfyUI's own cost drivers multiplied: steps x megapixels x batch (x frames),
summed over the prompt's samplers (`workers.comfy.workflow.sampler_work`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import PromptRefused
from workers.comfy.workflow import sampler_work


def check_work(prompt: Mapping[str, Any], max_work: float) -> None:
    """Raise PromptRefused (ComfyUI's 400 shape, naming the samplers) past `max_work` units."""
    work = sampler_work(prompt)
    total = sum(work.values())
    if total <= max_work:
        return
    node_errors = {
        node_id: _node_error(prompt, node_id, units, max_work) for node_id, units in work.items()
    }
    message = f"prompt needs {total:.0f} work units, past the farm's max_job_work {max_work:.0f}"
    raise PromptRefused(
        {
            "error": {
                "type": "work_limit_exceeded",
                "message": message,
                "details": "work units = steps x megapixels x batch size, summed over samplers",
                "extra_info": {"work_units": total, "max_job_work": max_work},
            },
            "node_errors": node_errors,
        }
    )


def _node_error(
    prompt: Mapping[str, Any], node_id: str, units: float, max_work: float
) -> dict[str, Any]:
    node = prompt.get(node_id)
    class_type = node.get("class_type", "") if isinstance(node, Mapping) else ""
    error = {
        "type": "work_limit_exceeded",
        "message": f"Node {node_id} ({class_type}) needs {units:.0f} work units",
        "details": f"max_job_work is {max_work:.0f}",
        "extra_info": {"work_units": units, "max_job_work": max_work},
    }
    return {"errors": [error], "dependent_outputs": [], "class_type": class_type}
