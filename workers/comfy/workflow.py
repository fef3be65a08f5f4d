"""What a prompt asks of a worker: model files, sampling work, sources able to run it."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, TypeGuard

from workers.comfy.catalog import Catalog
from workers.comfy.graph import Prompt, ancestors, is_link, links, node_inputs

# ComfyUI's `supported_pt_extensions`, plus the GGUF and ONNX files of popular custom nodes.
MODEL_EXTENSIONS: tuple[str, ...] = (
    ".safetensors",
    ".ckpt",
    ".pt",
    ".pt2",
    ".pth",
    ".bin",
    ".pkl",
    ".sft",
    ".gguf",
    ".onnx",
)
PRIMARY_MODEL_INPUTS: tuple[str, ...] = ("ckpt_name", "unet_name")
MODEL_LINKS: tuple[str, ...] = ("model", "guider")
LATENT_LINKS: tuple[str, ...] = ("latent_image", "samples", "latent", "pixels", "image", "images")
DEFAULT_STEPS = 20
DEFAULT_WIDTH = 512
DEFAULT_HEIGHT = 512
MAX_WALK = 32


def model_keys(prompt: Prompt, catalog: Catalog) -> frozenset[str]:
    """Every model file a node of the prompt names, as the value sent ("sd15/x.safetensors").

    A constant counts when it is a string ending in a model extension (`MODEL_EXTENSIONS`,
    any case) and the input is a combo in the catalogue, i.e. a list the instance fills from
    a folder; for a class or input the catalogue lacks, when the input name ends in "_name".
    So STRING inputs such as a `filename_prefix` never count, and neither do combos of
    non-files ("pixel_space", "euler"). Keys carry no folder: object_info does not say
    which folder a combo lists.
    """
    keys: set[str] = set()
    for node_id, node in prompt.items():
        class_type = node.get("class_type") if isinstance(node, Mapping) else None
        for name, value in node_inputs(prompt, node_id).items():
            if _is_model_file(value) and _is_file_input(catalog, class_type, name):
                keys.add(value)
    return frozenset(keys)


def _is_model_file(value: object) -> bool:
    return isinstance(value, str) and value.lower().endswith(MODEL_EXTENSIONS)


def _is_file_input(catalog: Catalog, class_type: object, name: str) -> bool:
    spec = catalog.input_spec(class_type, name) if isinstance(class_type, str) else None
    if spec is None:
        return name.endswith("_name")
    return spec.type == "COMBO"


def checkpoint(prompt: Prompt) -> str | None:
    """The primary model file: the checkpoint or UNet the first sampler's model comes from.

    The first sampler (by node id) is followed upstream, model links first, to the nearest
    node with a `ckpt_name` or `unet_name` string. Without samplers, or when that walk finds
    none, the first such value of any node (by node id), `ckpt_name` before `unet_name`.
    """
    samplers = sampler_nodes(prompt)
    if samplers:
        found = _nearest_primary_model(prompt, samplers[0][0])
        if found is not None:
            return found
    for name in PRIMARY_MODEL_INPUTS:
        for node_id in sorted(prompt, key=node_order):
            value = node_inputs(prompt, node_id).get(name)
            if isinstance(value, str):
                return value
    return None


def _nearest_primary_model(prompt: Prompt, start: str) -> str | None:
    queue: deque[str] = deque([start])
    seen = {start}
    while queue:
        node_id = queue.popleft()
        inputs = node_inputs(prompt, node_id)
        for name in PRIMARY_MODEL_INPUTS:
            if isinstance(inputs.get(name), str):
                return str(inputs[name])
        ranked = sorted(links(prompt, node_id), key=lambda link: link[0] not in MODEL_LINKS)
        for _, source, _ in ranked:
            if source not in seen:
                seen.add(source)
                queue.append(source)
    return None


def sampler_nodes(prompt: Prompt) -> list[tuple[str, int]]:
    """(node_id, steps) for every sampler node, by node id.

    A sampler is a node with a `latent_image` input and a `steps` or `sigmas` input
    (KSampler, KSamplerAdvanced, SamplerCustom, SamplerCustomAdvanced and look-alikes).
    Steps come from its `steps` (less `start_at_step`, capped by `end_at_step`), or from
    the `steps` of the scheduler its `sigmas` come from; DEFAULT_STEPS when unknown.
    """
    found = []
    for node_id in sorted(prompt, key=node_order):
        inputs = node_inputs(prompt, node_id)
        if "latent_image" in inputs and ("steps" in inputs or "sigmas" in inputs):
            found.append((node_id, _steps(prompt, inputs)))
    return found


def _steps(prompt: Prompt, inputs: Mapping[str, Any]) -> int:
    steps = inputs.get("steps")
    if _is_number(steps):
        start = inputs.get("start_at_step", 0)
        end = inputs.get("end_at_step", steps)
        start = int(start) if _is_number(start) else 0
        end = int(end) if _is_number(end) else int(steps)
        return max(0, min(int(steps), end) - start)
    return _scheduler_steps(prompt, inputs.get("sigmas"))


def _scheduler_steps(prompt: Prompt, link: Any) -> int:
    for _ in range(MAX_WALK):
        if not is_link(link):
            break
        inputs = node_inputs(prompt, link[0])
        if _is_number(inputs.get("steps")):
            return int(inputs["steps"])
        link = inputs.get("sigmas")
    return DEFAULT_STEPS


def work_units(prompt: Prompt) -> float:
    """Sum over samplers of steps * megapixels * batch size * frames (`sampler_work`)."""
    return sum(sampler_work(prompt).values())


def sampler_work(prompt: Prompt) -> dict[str, float]:
    """Work units of each sampler node: steps * megapixels * batch size * frames.

    The latent's size is found by following `latent_image` (then `samples`, `latent`,
    `pixels`, `image`) upstream to a node with integer `width` and `height` (its
    `batch_size` and `length` counting too), scaled by any `scale_by` on the way;
    DEFAULT_WIDTH x DEFAULT_HEIGHT, batch 1, one frame when none is found.
    One megapixel is 1,000,000 pixels.
    """
    return {
        node_id: steps * _latent_megapixels(prompt, node_id)
        for node_id, steps in sampler_nodes(prompt)
    }


def _latent_megapixels(prompt: Prompt, sampler_id: str) -> float:
    """Megapixels x batch x frames of the latent a sampler works on."""
    scale = 1.0
    node_id: str | None = _latent_source(node_inputs(prompt, sampler_id))
    for _ in range(MAX_WALK):
        if node_id is None:
            break
        inputs = node_inputs(prompt, node_id)
        if _is_number(inputs.get("width")) and _is_number(inputs.get("height")):
            return _size_of(inputs, scale)
        if _is_number(inputs.get("scale_by")):
            scale *= float(inputs["scale_by"])
        node_id = _latent_source(inputs)
    return DEFAULT_WIDTH * DEFAULT_HEIGHT * scale * scale / 1e6


def _size_of(inputs: Mapping[str, Any], scale: float) -> float:
    pixels = float(inputs["width"]) * float(inputs["height"]) * scale * scale
    batch = inputs.get("batch_size", 1)
    frames = inputs.get("length", 1)
    batch = batch if _is_number(batch) else 1
    frames = frames if _is_number(frames) else 1
    return pixels * float(batch) * float(frames) / 1e6


def _latent_source(inputs: Mapping[str, Any]) -> str | None:
    for name in LATENT_LINKS:
        value = inputs.get(name)
        if is_link(value):
            return str(value[0])
    return None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def capable_sources(
    prompt: Prompt,
    catalog: Catalog,
    outputs: Iterable[str] | None = None,
    *,
    ignore_inputs: Collection[tuple[str, str]] = (),
) -> frozenset[str]:
    """Sources of a (merged) catalogue that know every class and list every combo value used.

    Only `outputs` and their ancestors are considered when given (ComfyUI validates nothing
    else). `(class_type, input)` pairs in `ignore_inputs` are not checked, e.g.
    `("LoadImage", "image")` when the caller uploads the image to the chosen worker.
    """
    able = catalog.sources
    for node_id in _considered(prompt, outputs):
        node = prompt.get(node_id)
        class_type = node.get("class_type") if isinstance(node, Mapping) else None
        if not isinstance(class_type, str):
            continue
        able &= catalog.sources_for_class(class_type)
        for name, value in node_inputs(prompt, node_id).items():
            if not isinstance(value, list) and (class_type, name) not in ignore_inputs:
                able &= catalog.sources_for_value(class_type, name, value)
    return able


def _considered(prompt: Prompt, outputs: Iterable[str] | None) -> Iterator[str]:
    if outputs is None:
        yield from prompt
        return
    wanted: set[str] = set()
    for output in outputs:
        wanted.add(output)
        wanted |= ancestors(prompt, output)
    yield from (node_id for node_id in prompt if node_id in wanted)


def node_order(node_id: str) -> tuple[int, int, str]:
    """Sort key putting numeric ids in numeric order ("3" < "10"), other ids after them."""
    return (0, int(node_id), "") if node_id.isdigit() else (1, 0, node_id)
