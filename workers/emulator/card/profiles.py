"""Card profiles: what one ComfyUI instance on one kind of card costs, loaded from JSON.

A profile is data, not code: the shipped ones live in `workers/emulator/profiles/*.json` and
are described (field by field, with where each number comes from) in the README beside them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from workers.comfy.families import family_of

DEFAULT_FAMILY = "sd15"
ANY_FAMILY = "*"
_PACKAGE = "workers.emulator"
_T = TypeVar("_T")


class ProfileError(ValueError):
    """A profile that cannot be used: unknown name, bad JSON, missing or ill-typed fields."""


@dataclass(frozen=True)
class FamilyCost:
    """Costs of one model family (sd15, sdxl, ...) on one card, default flags, batch 1.

    A sampler step costs `sample_s_per_step + sample_s_per_step_mp * megapixels * batch`
    (the constant part is launch overhead that small latents do not hide). `model_size_mib`
    is the checkpoint's, or the diffusion model's for a family whose text encoder and VAE
    are files of their own (`text_encoder_size_mib`, `vae_size_mib`; 0: not read apart).
    """

    model_size_mib: float
    load_build_s: float
    clip_encode_s: float
    sample_s_per_step_mp: float
    vae_decode_s_per_mp: float
    width: int
    height: int
    sample_s_per_step: float = 0.0
    text_encoder_size_mib: float = 0.0
    vae_size_mib: float = 0.0


@dataclass(frozen=True)
class FlagEffect:
    """Multipliers one launch-flag setting applies to a family's phases (1.0 = no change)."""

    load_x: float = 1.0
    encode_x: float = 1.0
    sample_x: float = 1.0
    decode_x: float = 1.0
    black_images: bool = False
    """The VAE decodes black images (NaN in half precision, as the SDXL VAE in fp16)."""

    def combine(self, other: FlagEffect) -> FlagEffect:
        """Both effects at once (multipliers multiply)."""
        return FlagEffect(
            load_x=self.load_x * other.load_x,
            encode_x=self.encode_x * other.encode_x,
            sample_x=self.sample_x * other.sample_x,
            decode_x=self.decode_x * other.decode_x,
            black_images=self.black_images or other.black_images,
        )


NO_EFFECT = FlagEffect()


@dataclass(frozen=True)
class Profile:
    """Everything the cost model knows about one kind of card (see profiles/README.md).

    `flag_effects` maps a flag setting ("vram:low", "attention:split", "vae:fp32", "cpu",
    "cpu_vae", "preview:taesd") to effects per family, "*" meaning every family.
    Which family a checkpoint belongs to is the tree's one guess (`cost_family`).
    """

    name: str
    device_name: str
    vram_total_mib: float
    vram_reserve_mib: float
    startup_s: float
    first_job_penalty_s: float
    load_disk_mib_s: float
    load_page_cache_mib_s: float
    load_ram_mib_s: float
    node_constant_s: float
    save_s_per_mp: float
    cached_prompt_s: float
    families: Mapping[str, FamilyCost] = field(hash=False)
    flag_effects: Mapping[str, Mapping[str, FlagEffect]] = field(hash=False)
    previews: bool = False
    description: str = ""

    def family(self, family: str) -> FamilyCost:
        """The costs of `family`, falling back to the default family (sd15) when unknown."""
        return self.families.get(family) or self.families[DEFAULT_FAMILY]

    def effect(self, setting: str, family: str) -> FlagEffect:
        """The effect of one flag setting on `family`: the family's own entry, else the "*"
        entry, else no effect."""
        per_family = self.flag_effects.get(setting, {})
        return per_family.get(family) or per_family.get(ANY_FAMILY) or NO_EFFECT

    @property
    def vram_usable_mib(self) -> float:
        """VRAM that model weights may occupy (total less the inference reserve)."""
        return self.vram_total_mib - self.vram_reserve_mib


def profile_names() -> list[str]:
    """Names of the profiles shipped with the package, sorted."""
    folder = resources.files(_PACKAGE).joinpath("profiles")
    return sorted(
        p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")
    )


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name (e.g. "h200") or a profile JSON file by path.

    Raises ProfileError for an unknown name, a missing file, bad JSON or missing fields.
    """
    text, where = _read(name_or_path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where}: not valid JSON: {exc}") from None
    return profile_from_dict(data, where=where)


def profile_from_dict(data: object, *, where: str = "profile") -> Profile:
    """Build and check a Profile from parsed JSON (the format of the shipped files)."""
    obj = _object(data, where)
    families = _object(_require(obj, "families", where), f"{where}.families")
    if DEFAULT_FAMILY not in families:
        raise ProfileError(f"{where}.families: the default family {DEFAULT_FAMILY!r} is missing")
    scalars = {k: v for k, v in obj.items() if k not in _NESTED}
    profile = Profile(
        **_build(Profile, scalars, where, skip=_NESTED),
        families={
            k: _dataclass(FamilyCost, v, f"{where}.families.{k}") for k, v in families.items()
        },
        flag_effects=_effects(obj.get("flag_effects", {}), f"{where}.flag_effects"),
    )
    _check(profile, where)
    return profile


def cost_family(ckpt_name: str, profile: Profile) -> str:
    """The family whose costs `profile` charges for a checkpoint (or diffusion model): the
    family its file name suggests (`workers.comfy.families`, the gateway's guess too) when the
    profile prices that family, else "sd15"."""
    family = family_of(ckpt_name)
    return family if family in profile.families else DEFAULT_FAMILY


_NESTED = frozenset({"families", "flag_effects"})


def _check(profile: Profile, where: str) -> None:
    """Cross-field rules the per-field checks cannot see."""
    for name in ("load_disk_mib_s", "load_page_cache_mib_s", "load_ram_mib_s"):
        if getattr(profile, name) <= 0:
            raise ProfileError(f"{where}.{name}: must be positive")


def _read(name_or_path: str) -> tuple[str, str]:
    if name_or_path in profile_names():
        file = resources.files(_PACKAGE).joinpath("profiles", f"{name_or_path}.json")
        return file.read_text(encoding="utf-8"), f"profile {name_or_path!r}"
    path = Path(name_or_path)
    if path.suffix != ".json" or not path.is_file():
        known = ", ".join(profile_names())
        raise ProfileError(f"unknown profile {name_or_path!r}: not one of {known}, nor a JSON file")
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProfileError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _require(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ProfileError(f"{where}: missing field {key!r}")
    return obj[key]


def _dataclass(cls: type[_T], value: object, where: str) -> _T:
    return cls(**_build(cls, _object(value, where), where))


def _build(
    cls: type[Any], obj: Mapping[str, Any], where: str, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Check `obj` against the fields of `cls`: known keys only, required ones present,
    numbers where numbers are expected (non-negative), strings and booleans likewise."""
    known = {f.name: f for f in fields(cls) if f.name not in skip}
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise ProfileError(f"{where}: unknown field(s) {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for name, spec in known.items():
        if name in obj:
            out[name] = _typed(obj[name], str(spec.type), f"{where}.{name}")
        elif spec.default is MISSING:
            raise ProfileError(f"{where}: missing field {name!r}")
    return out


def _typed(value: object, type_name: str, where: str) -> object:
    if type_name in ("float", "int"):
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ProfileError(f"{where}: expected a non-negative number, got {value!r}")
        return int(value) if type_name == "int" else float(value)
    expected = {"str": str, "bool": bool}[type_name]
    if not isinstance(value, expected):
        raise ProfileError(f"{where}: expected {type_name}, got {value!r}")
    return value


def _effects(value: object, where: str) -> dict[str, dict[str, FlagEffect]]:
    obj = _object(value, where)
    return {
        setting: {
            fam: _dataclass(FlagEffect, eff, f"{where}.{setting}.{fam}")
            for fam, eff in _object(per_family, f"{where}.{setting}").items()
        }
        for setting, per_family in obj.items()
    }
