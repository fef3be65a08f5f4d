"""Launch arguments of one real ComfyUI worker: refuse what cannot work, add what helps.

Pure functions. The exclusive groups (VRAM, attention, VAE dtype, cache) are checked by
`LaunchFlags.parse`, the parser the emulator uses, so both read a command line alike.
`plan_launch` returns the final arguments with one human-readable reason per choice, for
`/gateway/workers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workers.comfy.flags import FlagError, LaunchFlags, VramMode
from workers.comfy.prompt_results import TXT2IMG

__all__ = [
    "CACHE_FLAGS",
    "GATEWAY_OWNED_FLAGS",
    "FlagError",
    "LaunchPlan",
    "check_args",
    "checkpoints_fitting",
    "checkpoints_kept",
    "lru_size_keeping",
    "plan_launch",
]

GATEWAY_OWNED_FLAGS = (
    "--port",
    "--listen",
    "--output-directory",
    "--temp-directory",
    "--input-directory",
    "--cuda-device",
)
"""Set by the gateway for every worker (its port, address and folders; the GPU through
CUDA_VISIBLE_DEVICES). A user's copy would come later on the command line and win."""

CACHE_FLAGS = frozenset({"--cache-classic", "--cache-lru", "--cache-none"})

SDXL_CHECKPOINT_MIB = 6619
"""An fp16 SDXL checkpoint (6.94 GB), the yardstick for "how many models fit"."""
VRAM_RESERVE_MIB = 2500
"""VRAM models cannot use: ComfyUI's 400 MB reserve, its 0.8 GB minimum inference memory and
the working memory of an SDXL 1024x1024 sample (the rtx4070ti profile's reserve)."""

_OWN_RESULTS = TXT2IMG.per_model + TXT2IMG.fresh
"""Node results a txt2img prompt adds to ComfyUI's cache on a checkpoint used before."""
_REUSED_RESULTS = TXT2IMG.per_model + TXT2IMG.per_family
"""Its results that a later prompt on the same checkpoint finds cached (loader, encoders,
latent)."""


def checkpoints_kept(lru_size: int) -> int:
    """How many checkpoints ComfyUI keeps under `--cache-lru N` (at least one) when txt2img
    prompts with fresh seeds take turns over them.

    N counts node results, not checkpoints: at the start of each prompt whole older prompts'
    results are dropped until N are left, and a checkpoint goes with its loader's result. To
    find K checkpoints still cached, the prompt that reuses one keeps its own 4 results and
    the K - 1 prompts since its last use, 6 each: 4 + 6 (K - 1) <= N (measured on an H200:
    8 keeps one, 10 two, 22 all three of three; bench/data/real_gpu/h200-cache-lru.json)."""
    return max(1, (lru_size - _REUSED_RESULTS) // _OWN_RESULTS + 1)


def lru_size_keeping(checkpoints: int) -> int:
    """The smallest `--cache-lru N` under which `checkpoints` in turn stay cached."""
    return _REUSED_RESULTS + _OWN_RESULTS * (max(checkpoints, 1) - 1)


LRU_KEPT_BY_FIT = ((4, 4), (2, 2))
"""(SDXL checkpoints that fit, checkpoints to keep cached), largest first: the `--cache-lru`
size added keeps that many in turn (22 and 10). Switching back to a checkpoint still cached
took 1.75 s instead of 5.85 on an H200."""

LOW_VRAM_SLOWDOWN = {VramMode.LOW: 2.4, VramMode.NO: 5.4}
"""How much slower jobs ran with the flag on an H200, where every model fits anyway."""
_VRAM_FLAG = {VramMode.LOW: "--lowvram", VramMode.NO: "--novram"}


@dataclass(frozen=True)
class LaunchPlan:
    """The arguments to launch one worker with (the user's first, then the added ones), what
    ComfyUI will make of them, and why each choice was made."""

    args: tuple[str, ...]
    flags: LaunchFlags
    reasons: tuple[str, ...]


def check_args(args: Sequence[str]) -> LaunchFlags:
    """Parse a worker's own ComfyUI arguments (without the gateway's).

    Raises FlagError for a flag the gateway sets (also as `--flag=value` or an abbreviation
    argparse would expand to it), for flags of one exclusive group combined (`--lowvram` with
    `--highvram`, two attention backends, two VAE dtypes, two cache modes) and for bad values.
    """
    owned = _owned_flags(args)
    if owned:
        this, it = ("this", "it") if len(owned) == 1 else ("these", "them")
        raise FlagError(
            f"{', '.join(owned)}: the gateway sets {this} for every worker (port, listen "
            f"address, folders; the GPU via CUDA_VISIBLE_DEVICES); remove {it} from the "
            "worker's args"
        )
    return LaunchFlags.parse(args)


def checkpoints_fitting(vram_total_mib: float) -> int:
    """How many SDXL-size checkpoints fit on a card beside ComfyUI's reserve (never negative)."""
    return max(0, int((vram_total_mib - VRAM_RESERVE_MIB) // SDXL_CHECKPOINT_MIB))


def plan_launch(args: Sequence[str], vram_total_mib: float | None) -> LaunchPlan:
    """The final arguments for a worker on a card with `vram_total_mib` (None: unknown; for a
    slot of several GPUs, the smallest card's).

    Adds `--cache-lru N` when several models fit and the user chose no cache mode; never adds
    a VRAM flag (`--lowvram`/`--novram` only slow a card the models fit on), and says so when
    the user chose one on such a card. Raises FlagError as `check_args` does.
    """
    check_args(args)
    added, cache_reason = _cache_choice(args, vram_total_mib)
    final = (*args, *added)
    flags = LaunchFlags.parse(final)
    reasons = [cache_reason, *_vram_notes(flags, vram_total_mib)]
    return LaunchPlan(args=tuple(final), flags=flags, reasons=tuple(reasons))


def _owned_flags(args: Sequence[str]) -> list[str]:
    """The gateway's flags among `args`, as written (argparse expands unique prefixes)."""
    found: list[str] = []
    for token in args:
        name = token.partition("=")[0]
        if len(name) > 2 and name.startswith("--") and _expands_to_owned(name):
            found.append(name)
    return found


def _expands_to_owned(name: str) -> bool:
    # No other ComfyUI 0.3.64 flag is a prefix of one of these, so a prefix is an abbreviation
    # (or ambiguous, which ComfyUI refuses anyway).
    return any(flag.startswith(name) for flag in GATEWAY_OWNED_FLAGS)


def _cache_choice(args: Sequence[str], vram_total_mib: float | None) -> tuple[list[str], str]:
    """The cache args to add and the reason."""
    chosen = [token.partition("=")[0] for token in args if token.partition("=")[0] in CACHE_FLAGS]
    if chosen:
        return [], f"cache: {chosen[-1]} kept as given"
    if vram_total_mib is None:
        return [], "cache: ComfyUI's classic cache kept (the card's VRAM is unknown)"
    fit = checkpoints_fitting(vram_total_mib)
    for min_fit, kept in LRU_KEPT_BY_FIT:
        if fit >= min_fit:
            size = lru_size_keeping(kept)
            reason = (
                f"cache: --cache-lru {size} added: {fit} SDXL-size checkpoints fit in "
                f"{vram_total_mib:.0f} MiB, and {size} node results keep {kept} checkpoints "
                "used in turn cached, so one used before comes back without a load (3.3x "
                "faster on an H200)"
            )
            return ["--cache-lru", str(size)], reason
    return [], (
        f"cache: ComfyUI's classic cache kept: {fit} SDXL-size checkpoint(s) fit in "
        f"{vram_total_mib:.0f} MiB, too few to keep several loaded"
    )


def _vram_notes(flags: LaunchFlags, vram_total_mib: float | None) -> list[str]:
    """A warning when the user slows a big card down with --lowvram or --novram."""
    slowdown = LOW_VRAM_SLOWDOWN.get(flags.vram_mode)
    if slowdown is None or vram_total_mib is None:
        return []
    if checkpoints_fitting(vram_total_mib) < 2:
        return []
    flag = _VRAM_FLAG[flags.vram_mode]
    return [
        f"vram: {flag} kept as given, but models fit in {vram_total_mib:.0f} MiB without it; "
        f"it made jobs {slowdown}x slower on an H200"
    ]
