"""The work of one node: how long it takes (cost model x time scale) and what it leaves behind.

Costs follow `costmodel.job_phases`: the loader reads the checkpoint or diffusion model (by
LoadTier); the loaders of separate text encoder and VAE files read their family's sizes of
them (from disk the first time this instance reads a file, else from the page cache); text
encoders and VAE nodes cost their per-family times (the prompt's family for a node whose model
is no file of its own); a sampler pays the copy of freshly loaded weights to VRAM and the
instance's first-job penalty before its first step, then one `sample_step_s` per step with the
progress hook after each; SaveImage/PreviewImage write real PNGs; everything else costs
`node_s`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from PIL import Image

from workers.comfy.catalog import Catalog
from workers.emulator.card.costmodel import CostModel, LoadTier
from workers.emulator.card.pagecache import PageCache
from workers.emulator.card.profiles import DEFAULT_FAMILY, Profile, cost_family
from workers.emulator.execution.nodeoutputs import (
    TEXT_ENCODER_INPUTS,
    VAE_FILE_INPUT,
    LoadedFile,
    Picture,
    Role,
    file_names,
    first_picture,
    model_of,
    outputs,
    preview_text,
    role_of,
)
from workers.emulator.files import Dirs, SavePathError, save_path
from workers.emulator.http import images

log = logging.getLogger(__name__)

# (node_id, value, max, preview as (format, bytes) or None)
StepHook = Callable[[str, int, int, tuple[str, bytes] | None], Awaitable[None]]
Result = tuple[tuple[Any, ...], dict[str, Any] | None]

FILE_IMAGE_LOADERS = frozenset({"LoadImage", "LoadImageMask", "LoadImageOutput"})
_TEMP_LETTERS = "abcdefghijklmnopqrstupvxyz"  # ComfyUI's own alphabet (the typo included)


class NodeFailure(Exception):
    """A node that raised: becomes an `execution_error` with this message and type."""

    def __init__(self, message: str, exception_type: str = "Exception") -> None:
        super().__init__(message)
        self.message = message
        self.exception_type = exception_type


@dataclass(frozen=True)
class WorkOptions:
    """Instance-wide settings that shape node work."""

    time_scale: float = 1.0
    previews: bool = False
    preview_method: str = "none"
    preview_size: int = 512
    disable_metadata: bool = False
    unload_after_prompt: bool = False
    """`--disable-smart-memory`: every model leaves the card once a prompt ends."""


@dataclass
class Instance:
    """What one emulated instance remembers between prompts, and its counters."""

    first_job_pending: bool = True
    loads: dict[str, int] = field(default_factory=dict)
    files_read: PageCache = field(default_factory=set[str])
    """Text encoder and VAE files read before (in the page cache since; the host's, shared
    with the checkpoints' `Residency.page_cache`)."""
    nodes_executed: int = 0
    steps_sampled: int = 0
    images_saved: int = 0


@dataclass
class WorkContext:
    """One prompt, as its nodes' work needs it."""

    prompt: Mapping[str, Any]
    extra_data: Mapping[str, Any]
    steps: Mapping[str, int]
    tiers: Mapping[str, LoadTier | None]
    hook: StepHook
    pending_upload_s: float = 0.0
    family: str = DEFAULT_FAMILY
    """The family of the prompt's primary model (`workflow.checkpoint`)."""


class NodeWork:
    """Runs nodes of one prompt: sleeps their cost, writes their files, makes their outputs."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        costs: CostModel,
        dirs: Dirs,
        options: WorkOptions,
        instance: Instance,
        spend: Callable[[float], Awaitable[None]],
        context: WorkContext,
    ) -> None:
        self.catalog = catalog
        self.costs = costs
        self.profile: Profile = costs.profile
        self.dirs = dirs
        self.options = options
        self.instance = instance
        self.spend = spend
        self.context = context

    def role(self, node_id: str, class_type: str) -> Role:
        return role_of(class_type, self.catalog, node_id in self.context.steps)

    async def run(self, node_id: str, class_type: str, inputs: Mapping[str, Any]) -> Result:
        """Do the node's work; returns its outputs and its UI output (None when it has none)."""
        role = self.role(node_id, class_type)
        self.instance.nodes_executed += 1
        if role in (Role.SAVE, Role.PREVIEW):
            return (), await self._save(inputs, role)
        if role is Role.TEXT_PREVIEW:
            await self.spend(self.costs.node_s())
            return (), {"text": [preview_text(inputs.get("source"))]}
        if role is Role.WS_SAVE:
            await self._send_images(node_id, inputs)
            return (), None
        await self._compute(role, node_id, inputs)
        produced = outputs(class_type, self.catalog, inputs, self._loaded(class_type, inputs))
        if role is Role.VAE and self._decodes_black(inputs):
            produced = tuple(_black(value) for value in produced)
        return produced, None

    def _decodes_black(self, inputs: Mapping[str, Any]) -> bool:
        """Whether this card's launch flags make the VAE decode black images for the model
        (the profile's `black_images`, as `--fp16-vae` does to SDXL's VAE)."""
        return self.costs.effect(self._family(model_of(inputs))).black_images

    def _family(self, model: str | None) -> str:
        """The family a node works for: its model file's, else the prompt's."""
        return cost_family(model, self.profile) if model else self.context.family

    async def _compute(self, role: Role, node_id: str, inputs: Mapping[str, Any]) -> None:
        """Spend what a node that produces outputs costs."""
        model = model_of(inputs)
        family = self._family(model)
        if role is Role.LOADER:
            await self._load(model, family)
        elif role is Role.TEXT_ENCODER_LOADER:
            size_mib = self.profile.family(family).text_encoder_size_mib
            await self._read_files(file_names(inputs, TEXT_ENCODER_INPUTS), family, size_mib)
        elif role is Role.VAE_LOADER:
            size_mib = self.profile.family(family).vae_size_mib
            await self._read_files(file_names(inputs, (VAE_FILE_INPUT,)), family, size_mib)
        elif role is Role.TEXT_ENCODE:
            await self.spend(self.costs.clip_encode_s(family))
        elif role is Role.SAMPLER:
            await self._sample(node_id, inputs, family)
        elif role is Role.VAE:
            picture = first_picture(inputs) or Picture("LATENT", 512, 512, 1, 0)
            await self.spend(self.costs.vae_decode_s(family, picture.megapixels, picture.batch))
        else:
            await self.spend(self.costs.node_s())

    async def _load(self, model: str | None, family: str) -> None:
        tier = self.context.tiers.get(model or "")
        if tier is None or tier is LoadTier.RAM:
            # The loader runs although the model is held: the file is read again (page cache).
            tier = LoadTier.PAGE_CACHE
        self.instance.loads[tier.value] = self.instance.loads.get(tier.value, 0) + 1
        await self.spend(self.costs.read_s(family, tier))

    async def _read_files(self, names: tuple[str, ...], family: str, size_mib: float) -> None:
        """Read separate model files of `size_mib` together (the family's size of that kind of
        file: a DualCLIPLoader's two text encoders share it)."""
        seconds = self.costs.node_s()
        for name in names:
            tier = LoadTier.PAGE_CACHE if name in self.instance.files_read else LoadTier.DISK
            self.instance.files_read.add(name)
            seconds += self.costs.file_read_s(family, size_mib / len(names), tier)
        await self.spend(seconds)

    def _loaded(self, class_type: str, inputs: Mapping[str, Any]) -> LoadedFile | None:
        if class_type not in FILE_IMAGE_LOADERS or not isinstance(inputs.get("image"), str):
            return None
        path = self.dirs.annotated_path(inputs["image"])
        try:
            return LoadedFile(*images.size_of(path), path)
        except FileNotFoundError:
            raise NodeFailure(
                f"[Errno 2] No such file or directory: '{path}'", "FileNotFoundError"
            ) from None
        except OSError as exc:
            raise NodeFailure(str(exc), "PIL.UnidentifiedImageError") from None

    async def _sample(self, node_id: str, inputs: Mapping[str, Any], family: str) -> None:
        latent = first_picture(inputs, "LATENT") or Picture("LATENT", 512, 512, 1, 0)
        before = self.context.pending_upload_s
        self.context.pending_upload_s = 0.0
        if self.instance.first_job_pending:
            self.instance.first_job_pending = False
            before += self.costs.first_job_penalty_s()
        await self.spend(before)
        steps = self.context.steps[node_id]
        step_s = self.costs.sample_step_s(family, latent.megapixels, latent.batch)
        for step in range(1, steps + 1):
            await self.spend(step_s)
            self.instance.steps_sampled += 1
            await self.context.hook(node_id, step, steps, self._preview(latent, step))

    def _preview(self, latent: Picture, step: int) -> tuple[str, bytes] | None:
        if not self.options.previews or self.options.preview_method == "none":
            return None
        method, size = self.options.preview_method, self.options.preview_size
        data = images.sampler_preview(latent.width, latent.height, latent.tint, step, method, size)
        return "JPEG", data

    async def _save(self, inputs: Mapping[str, Any], role: Role) -> dict[str, Any]:
        picture = first_picture(inputs) or Picture("IMAGE", 512, 512, 1, 0)
        temp = role is Role.PREVIEW
        prefix = str(inputs.get("filename_prefix", "ComfyUI"))
        if temp:
            prefix += "_temp_" + "".join(random.choice(_TEMP_LETTERS) for _ in range(5))
        base = self.dirs.temp if temp else self.dirs.output
        try:
            where = save_path(prefix, base, picture.width, picture.height)
        except SavePathError as exc:
            raise NodeFailure(str(exc)) from None
        results = await asyncio.to_thread(
            self._write, where.folder, where.filename, where.counter, picture, 1 if temp else 4
        )
        # After the write: the host's seconds writing the files are part of the save's cost,
        # paid back by this sleep (`Pacer`), not added to it.
        await self.spend(self.costs.save_s(picture.megapixels, picture.batch))
        kind = "temp" if temp else "output"
        return {
            "images": [{"filename": f, "subfolder": where.subfolder, "type": kind} for f in results]
        }

    def _write(
        self, folder: str, filename: str, counter: int, picture: Picture, level: int
    ) -> list[str]:
        info = None
        if not self.options.disable_metadata:
            extra = self.context.extra_data.get("extra_pnginfo")
            info = images.png_info(
                self.context.prompt, extra if isinstance(extra, Mapping) else None
            )
        names = []
        for index in range(picture.batch):
            name = f"{filename.replace('%batch_num%', str(index))}_{counter + index:05}_.png"
            image = _image(picture, index)
            images.write_png(os.path.join(folder, name), image, info, level)
            names.append(name)
        self.instance.images_saved += len(names)
        return names

    async def _send_images(self, node_id: str, inputs: Mapping[str, Any]) -> None:
        """SaveImageWebsocket: each image goes out as a PNG preview through the progress hook."""
        picture = first_picture(inputs, "IMAGE") or Picture("IMAGE", 512, 512, 1, 0)
        encoded = [images.encode(_image(picture, i), "PNG") for i in range(picture.batch)]
        await self.spend(self.costs.save_s(picture.megapixels, picture.batch))
        for index, data in enumerate(encoded):
            await self.context.hook(node_id, index, picture.batch, ("PNG", data))


def _image(picture: Picture, index: int) -> Image.Image:
    """The pixels of one image of a batch: a loaded file's own, else rendered (images of one
    batch differ a little; a solid picture stays one colour)."""
    if picture.source is not None:
        try:
            return images.load_rgb(picture.source)
        except OSError:
            log.warning("could not reread %s; rendering instead", picture.source)
    tint = picture.tint if picture.solid else (picture.tint + index * 0x3F) & 0xFFFFFF
    return images.render(picture.width, picture.height, tint, picture.solid)


def _black(value: Any) -> Any:
    """A decoded IMAGE as a broken VAE leaves it: all black."""
    if isinstance(value, Picture) and value.kind == "IMAGE":
        return replace(value, tint=0, solid=True, source=None)
    return value
