"""The emulator's cost model: seconds per phase of a job on one card with one set of flags.

`job_phases` is the single place where a job's phase times are computed; the emulator and the
scheduler simulator both call it, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from workers.comfy.flags import Attention, LaunchFlags, VaeDtype, VramMode
from workers.emulator.card.profiles import NO_EFFECT, FlagEffect, Profile


class LoadTier(StrEnum):
    """Where a checkpoint's weights come from when it must be loaded."""

    DISK = "disk"
    PAGE_CACHE = "page_cache"
    RAM = "ram"


@dataclass(frozen=True)
class JobShape:
    """What a txt2img job asks for, as far as its cost is concerned."""

    checkpoint: str
    family: str
    steps: int
    width: int
    height: int
    batch: int = 1

    @property
    def megapixels(self) -> float:
        """Output size of one image in megapixels (2**20 pixels)."""
        return self.width * self.height / float(1 << 20)


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds per phase as a client sees them from the WebSocket `executing` transitions.

    load_s is the loader node (read + build); moving the weights to the GPU happens inside the
    sampler in real ComfyUI, so it is part of sample_s. other_s covers every other node (empty
    latent, save, ...) and the prompt's fixed overhead.
    """

    load_s: float
    encode_s: float
    sample_s: float
    decode_s: float
    other_s: float

    @property
    def total_s(self) -> float:
        return self.load_s + self.encode_s + self.sample_s + self.decode_s + self.other_s


@dataclass(frozen=True)
class CostModel:
    """A profile combined with launch flags; every method returns seconds at time scale 1.

    Flag effects multiply: each setting that differs from ComfyUI's defaults looks up its
    multipliers for the family in the profile (`Profile.effect`).
    """

    profile: Profile
    flags: LaunchFlags

    def startup_s(self) -> float:
        """From process start until `/system_stats` answers."""
        return self.profile.startup_s

    def first_job_penalty_s(self) -> float:
        """Extra time of the first job an instance runs (CUDA init, kernel warm-up)."""
        return self.profile.first_job_penalty_s

    def effect(self, family: str) -> FlagEffect:
        """The combined effect of every launch flag on `family`."""
        combined = NO_EFFECT
        for setting in flag_settings(self.flags):
            combined = combined.combine(self.profile.effect(setting, family))
        return combined

    def read_s(self, family: str, tier: LoadTier) -> float:
        """The loader node: reading the checkpoint from `tier` and building the model
        (0 for RAM: the loader's output is still cached, only the GPU copy is missing)."""
        if tier is LoadTier.RAM:
            return 0.0
        cost = self.profile.family(family)
        read_s = cost.load_build_s + cost.model_size_mib / self._read_mib_s(tier)
        return read_s * self.effect(family).load_x

    def file_read_s(self, family: str, size_mib: float, tier: LoadTier) -> float:
        """A loader of a separate file (text encoder, VAE) of `size_mib`: reading it from
        `tier` (0 for RAM, and for a file of no size: a family that has none apart)."""
        if tier is LoadTier.RAM or size_mib <= 0:
            return 0.0
        return size_mib / self._read_mib_s(tier) * self.effect(family).load_x

    def _read_mib_s(self, tier: LoadTier) -> float:
        if tier is LoadTier.DISK:
            return self.profile.load_disk_mib_s
        return self.profile.load_page_cache_mib_s

    def upload_s(self, family: str) -> float:
        """Copying the weights from host RAM to VRAM (charged to the sampler phase)."""
        return self.profile.family(family).model_size_mib / self.profile.load_ram_mib_s

    def load_s(self, family: str, tier: LoadTier) -> float:
        """Everything a load from `tier` adds to a job: read_s + upload_s."""
        return self.read_s(family, tier) + self.upload_s(family)

    def clip_encode_s(self, family: str) -> float:
        """One CLIPTextEncode node with a warm text encoder."""
        return self.profile.family(family).clip_encode_s * self.effect(family).encode_x

    def sample_step_s(self, family: str, megapixels: float, batch: int) -> float:
        """One sampler step (both CFG passes) for `batch` images of `megapixels` each."""
        cost = self.profile.family(family)
        step_s = cost.sample_s_per_step + cost.sample_s_per_step_mp * megapixels * batch
        return step_s * self.effect(family).sample_x

    def vae_decode_s(self, family: str, megapixels: float, batch: int) -> float:
        """VAE decode of `batch` images of `megapixels` each."""
        cost = self.profile.family(family)
        return cost.vae_decode_s_per_mp * megapixels * batch * self.effect(family).decode_x

    def node_s(self) -> float:
        """Any other node (EmptyLatentImage, ...)."""
        return self.profile.node_constant_s

    def save_s(self, megapixels: float, batch: int) -> float:
        """SaveImage: PNG encoding and writing of `batch` images."""
        return self.profile.save_s_per_mp * megapixels * batch

    def cached_prompt_s(self) -> float:
        """A prompt whose every node is cached (identical resubmission), end to end."""
        return self.profile.cached_prompt_s


def flag_settings(flags: LaunchFlags) -> tuple[str, ...]:
    """The profile keys (`Profile.flag_effects`) of every non-default setting in `flags`."""
    settings: list[str] = []
    if flags.cpu:
        settings.append("cpu")
    elif flags.vram_mode != VramMode.NORMAL:
        settings.append(f"vram:{flags.vram_mode}")
    if flags.attention != Attention.PYTORCH:
        settings.append(f"attention:{flags.attention}")
    if flags.vae_dtype != VaeDtype.DEFAULT:
        settings.append(f"vae:{flags.vae_dtype}")
    if flags.cpu_vae:
        settings.append("cpu_vae")
    if flags.preview_method != "none":
        settings.append(f"preview:{flags.preview_method}")
    return tuple(settings)


def job_phases(
    model: CostModel,
    job: JobShape,
    *,
    load_tier: LoadTier | None,
    first_job: bool,
    encode_cached: bool = False,
    encodes: int | None = None,
) -> PhaseTimes:
    """Phase times of one standard txt2img job (loader, 2x CLIPTextEncode, EmptyLatentImage,
    KSampler, VAEDecode, SaveImage).

    load_tier None means the checkpoint is resident (no load); a load's read is the loader
    phase, its copy to VRAM lands in the sampler phase (as in ComfyUI). first_job adds the
    instance's first-job penalty to the sampler phase (where CUDA/cuDNN warm-up shows).
    encodes is how many CLIPTextEncode nodes run; by default 2 after a load or on a first job,
    else 1 (a new positive prompt, the negative one cached), 0 when encode_cached.
    """
    mp = job.megapixels
    n_encodes = _encodes(load_tier, first_job, encode_cached, encodes)
    sample_s = job.steps * model.sample_step_s(job.family, mp, job.batch)
    if load_tier is not None:
        sample_s += model.upload_s(job.family)
    if first_job:
        sample_s += model.first_job_penalty_s()
    return PhaseTimes(
        load_s=0.0 if load_tier is None else model.read_s(job.family, load_tier),
        encode_s=n_encodes * model.clip_encode_s(job.family),
        sample_s=sample_s,
        decode_s=model.vae_decode_s(job.family, mp, job.batch),
        other_s=model.node_s() + model.save_s(mp, job.batch),
    )


def _encodes(
    load_tier: LoadTier | None, first_job: bool, encode_cached: bool, encodes: int | None
) -> int:
    if encodes is not None:
        return encodes
    if encode_cached:
        return 0
    return 2 if load_tier is not None or first_job else 1
