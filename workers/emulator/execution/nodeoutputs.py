"""What an emulated node produces: plausible outputs for any class of the catalogue.

No tensors: an IMAGE, MASK or LATENT is a `Picture` (size, batch, tint); models, conditioning
and every other type are a `Handle` naming the model file it derives from (so costs can be
charged to the right model family); primitives are passed through from the node's constants.
A node's role says which cost it is charged (loader, text encoder, sampler, VAE, save...).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from workers.comfy.catalog import Catalog

PICTURE_TYPES = frozenset({"IMAGE", "MASK", "LATENT"})
MODEL_FILE_INPUTS = ("ckpt_name", "unet_name")
TEXT_ENCODER_INPUTS = ("clip_name", "clip_name1", "clip_name2", "clip_name3", "clip_name4")
VAE_FILE_INPUT = "vae_name"
VAE_CLASSES = frozenset(
    {"VAEDecode", "VAEDecodeTiled", "VAEEncode", "VAEEncodeTiled", "VAEEncodeForInpaint"}
)
DEFAULT_SIZE = 512
_PRIMITIVES: dict[str, tuple[type, Any]] = {
    "INT": (int, 0),
    "FLOAT": (float, 0.0),
    "STRING": (str, ""),
    "BOOLEAN": (bool, False),
}


class Role(StrEnum):
    """Which cost a node is charged."""

    LOADER = "loader"
    TEXT_ENCODER_LOADER = "text_encoder_loader"
    VAE_LOADER = "vae_loader"
    TEXT_ENCODE = "text_encode"
    SAMPLER = "sampler"
    VAE = "vae"
    SAVE = "save"
    PREVIEW = "preview"
    TEXT_PREVIEW = "text_preview"
    WS_SAVE = "ws_save"
    OTHER = "other"


@dataclass(frozen=True)
class Picture:
    """An IMAGE, MASK or LATENT: pixel size, batch and a 24-bit tint to render it with
    (`solid`: one flat colour, as EmptyImage makes; else a gradient). `source` is the file an
    IMAGE was loaded from unchanged (LoadImage): saving it writes that file's pixels."""

    kind: str
    width: int
    height: int
    batch: int
    tint: int
    solid: bool = False
    source: str | None = None

    @property
    def megapixels(self) -> float:
        """One image's size in megapixels of 2**20 pixels (the cost model's unit)."""
        return self.width * self.height / float(1 << 20)


@dataclass(frozen=True)
class LoadedFile:
    """An image file a loader node read: its size and where it is."""

    width: int
    height: int
    path: str


@dataclass(frozen=True)
class Handle:
    """Any other value: its type and the model file it derives from (None: no model)."""

    type_name: str
    model: str | None


def role_of(class_type: str, catalog: Catalog, is_sampler: bool) -> Role:
    """The role of a class; `is_sampler` comes from the prompt (workflow.sampler_nodes)."""
    if is_sampler:
        return Role.SAMPLER
    special = {
        "SaveImageWebsocket": Role.WS_SAVE,
        "MaskPreview": Role.PREVIEW,
        "PreviewAny": Role.TEXT_PREVIEW,
    }
    if class_type in special:
        return special[class_type]
    if catalog.is_output_node(class_type) and _takes(catalog, class_type, "images", "IMAGE"):
        return Role.PREVIEW if "Preview" in class_type else Role.SAVE
    return _model_role(class_type, catalog)


def _model_role(class_type: str, catalog: Catalog) -> Role:
    if any(catalog.input_spec(class_type, name) for name in MODEL_FILE_INPUTS):
        return Role.LOADER
    returns = catalog.return_types(class_type)
    if "CLIP" in returns and any(catalog.input_spec(class_type, n) for n in TEXT_ENCODER_INPUTS):
        return Role.TEXT_ENCODER_LOADER
    if "VAE" in returns and catalog.input_spec(class_type, VAE_FILE_INPUT):
        return Role.VAE_LOADER
    if class_type in VAE_CLASSES:
        return Role.VAE
    encodes = "CONDITIONING" in returns
    if encodes and _takes_type(catalog, class_type, "CLIP"):
        return Role.TEXT_ENCODE
    return Role.OTHER


def _takes(catalog: Catalog, class_type: str, name: str, type_name: str) -> bool:
    spec = catalog.input_spec(class_type, name)
    return spec is not None and spec.type == type_name


def _takes_type(catalog: Catalog, class_type: str, type_name: str) -> bool:
    return any(spec.type == type_name for spec in catalog.inputs(class_type))


def model_of(inputs: Mapping[str, Any]) -> str | None:
    """The model file a node works with: its own ckpt/unet name, else its inputs' model."""
    for name in MODEL_FILE_INPUTS:
        if isinstance(inputs.get(name), str):
            return str(inputs[name])
    for value in inputs.values():
        if isinstance(value, Handle) and value.model is not None:
            return value.model
    return None


def file_names(inputs: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, ...]:
    """The file names a loader node reads: its string constants among `names`."""
    return tuple(str(inputs[n]) for n in names if isinstance(inputs.get(n), str))


def first_picture(inputs: Mapping[str, Any], kind: str | None = None) -> Picture | None:
    for value in inputs.values():
        if isinstance(value, Picture) and (kind is None or value.kind == kind):
            return value
    return None


def tint_of(inputs: Mapping[str, Any]) -> int:
    """A stable tint from the inputs: equal inputs give equal pictures."""
    if isinstance(inputs.get("color"), int):
        return int(inputs["color"]) & 0xFFFFFF
    text = json.dumps({k: _describe(v) for k, v in sorted(inputs.items())}, default=str)
    return zlib.crc32(text.encode("utf-8")) & 0xFFFFFF


def _describe(value: Any) -> Any:
    if isinstance(value, Picture | Handle):
        return repr(value)
    return value


def outputs(
    class_type: str, catalog: Catalog, inputs: Mapping[str, Any], loaded: LoadedFile | None
) -> tuple[Any, ...]:
    """One value per RETURN_TYPE of the class; `loaded` is the file a loader read."""
    model = model_of(inputs)
    return tuple(
        _output(str(kind), inputs, model, loaded) for kind in catalog.return_types(class_type)
    )


def _output(
    kind: str, inputs: Mapping[str, Any], model: str | None, loaded: LoadedFile | None
) -> Any:
    if kind in PICTURE_TYPES:
        return picture(kind, inputs, loaded)
    if kind in _PRIMITIVES:
        python_type, default = _PRIMITIVES[kind]
        for value in inputs.values():
            if type(value) is python_type:
                return value
        return default
    return Handle(kind, model)


def picture(kind: str, inputs: Mapping[str, Any], loaded: LoadedFile | None = None) -> Picture:
    """The picture a node makes: a loaded file's, else its own width/height/batch_size, else
    its input picture's."""
    if loaded is not None:
        path = loaded.path if kind == "IMAGE" else None
        return Picture(kind, loaded.width, loaded.height, 1, tint_of(inputs), source=path)
    source = first_picture(inputs)
    width, height = _dimension(inputs, "width", source), _dimension(inputs, "height", source)
    batch = inputs.get("batch_size")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        batch = source.batch if source is not None else 1
    solid = isinstance(inputs.get("color"), int)
    return Picture(kind, max(1, width), max(1, height), batch, tint_of(inputs), solid)


def _dimension(inputs: Mapping[str, Any], name: str, source: Picture | None) -> int:
    value = inputs.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if source is not None:
        return source.width if name == "width" else source.height
    return DEFAULT_SIZE


def preview_text(value: Any) -> str:
    """PreviewAny's text: strings as they are, numbers by str(), anything else described."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool):
        return str(value)
    if value is None:
        return "None"
    return str(format_input(value))


def format_input(value: Any) -> Any:
    """One value of `current_inputs` in an execution_error, as ComfyUI formats it."""
    if value is None or isinstance(value, int | float | bool | str):
        return value
    if isinstance(value, Picture):
        return f"tensor of shape [{value.batch}, {value.height}, {value.width}, 3]"
    if isinstance(value, Handle):
        return f"<{value.type_name} object of {value.model}>"
    return str(value)
