"""The scorecard's cells: an arrival shape on a farm with a catalogue of K checkpoints.

Three grids: `quick` (a handful of small cells, a smoke run), `default` (every shape on eight
farm regimes that between them cover every axis, sized to run in about ten minutes on two
cores) and `full` (every shape x farm kind x 2-16 workers x K x cache mode).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from bench.sim.scenario import Scenario
from workers.comfy.launch_args import plan_launch
from workers.emulator.card.profiles import load_profile

GRIDS = ("quick", "default", "full")


@dataclass(frozen=True)
class Shape:
    """An arrival shape: how many jobs it has in each grid, and how they arrive."""

    name: str
    arrival: str
    kind: str
    """`closed` (one client, rounds on an idle farm), `batch` (all at once) or `load` (an
    open arrival process at `load` x the capacity bound)."""
    jobs: tuple[int, int, int]
    """Jobs in the quick, default and full grids."""
    load: float = 0.8
    burst: int = 1

    def count(self, grid: str) -> int:
        return self.jobs[GRIDS.index(grid)]


SHAPES = (
    Shape("sequential", "sequential", "closed", (12, 30, 60)),
    Shape("burst2", "bursts", "closed", (8, 40, 80), burst=2),
    Shape("burst4", "bursts", "closed", (16, 48, 96), burst=4),
    Shape("burst16", "bursts", "closed", (32, 96, 192), burst=16),
    Shape("batch100", "batch", "batch", (100, 100, 100)),
    Shape("batch500", "batch", "batch", (500, 500, 500)),
    Shape("batch2000", "batch", "batch", (2000, 2000, 2000)),
    Shape("poisson20", "poisson", "load", (200, 600, 2000), load=0.2),
    Shape("poisson50", "poisson", "load", (200, 600, 2000), load=0.5),
    Shape("poisson80", "poisson", "load", (200, 600, 2000), load=0.8),
    Shape("poisson95", "poisson", "load", (200, 600, 2000), load=0.95),
    Shape("session", "session", "load", (200, 600, 2000), load=0.8),
)
SHAPE = {shape.name: shape for shape in SHAPES}


@dataclass(frozen=True)
class Farm:
    kind: str
    """`uniform` (all h200), `mixed` (half h200, half rtx4070ti: fast and slow cards) or
    `flags` (all h200, half of them with `--cache-lru 8`: one card, different flags)."""
    workers: int
    cache: str = "classic"
    """`classic` (ComfyUI's default cache), `lru` (`--cache-lru 8` on every worker) or
    `gateway` (each card as the gateway launches it when no cache flag is given: `--cache-lru
    22` on an H200, four checkpoints kept, the classic cache on an RTX 4070 Ti); a `flags`
    farm has both classic and `--cache-lru 8`."""

    @property
    def spec(self) -> str:
        """The farm in `bench.sim.farm` syntax."""
        fast, slow = self.workers - self.workers // 2, self.workers // 2
        if self.kind == "uniform":
            return f"{self.workers}*{self.card('h200')}"
        if self.kind == "mixed":
            return f"{fast}*{self.card('h200')},{slow}*{self.card('rtx4070ti')}"
        if self.kind == "flags":
            return f"{fast}*h200,{slow}*h200@lru8"
        raise ValueError(f"unknown farm kind {self.kind!r}")

    def card(self, profile: str) -> str:
        """One card of the farm in `bench.sim.farm` syntax, its cache as `cache` says."""
        if self.cache == "lru":
            return f"{profile}@lru8"
        if self.cache == "gateway":
            vram_mib = load_profile(profile).vram_total_mib
            args = plan_launch((), vram_mib).args
            return f"{profile}@lru{args[-1]}" if "--cache-lru" in args else profile
        return profile

    @property
    def mixed(self) -> bool:
        """Fast and slow cards, or one card with different flags."""
        return self.kind in ("mixed", "flags")


K_RULES = {"1": (0, 1), "N": (1, 0), "4N": (4, 0)}
"""K = a x N + b for N workers, as (a, b)."""


@dataclass(frozen=True)
class Cell:
    shape: Shape
    farm: Farm
    k_rule: str
    """`1`, `N` or `4N` checkpoints for N workers."""

    @property
    def k(self) -> int:
        per_worker, extra = K_RULES[self.k_rule]
        return per_worker * self.farm.workers + extra

    @property
    def label(self) -> str:
        farm = self.farm
        cache = "" if farm.kind == "flags" else f" {farm.cache}"
        return f"{self.shape.name} {farm.kind}{farm.workers}{cache} K={self.k_rule}"

    def scenario(self, grid: str, seed: int) -> Scenario:
        shape = self.shape
        return Scenario(
            farm=self.farm.spec,
            k=self.k,
            load=shape.load,
            jobs=shape.count(grid),
            arrival=shape.arrival,
            seed=seed,
            burst=shape.burst,
        )


def cells(shapes: Iterable[str], farm: Farm, k_rule: str) -> list[Cell]:
    return [Cell(SHAPE[name], farm, k_rule) for name in shapes]


CHEAP = (
    "sequential",
    "burst2",
    "burst4",
    "burst16",
    "batch100",
    "poisson20",
    "poisson50",
    "poisson80",
    "poisson95",
    "session",
)
REGIMES = (
    (Farm("mixed", 2), "4N"),
    (Farm("mixed", 4), "N"),
    (Farm("mixed", 4, "lru"), "4N"),
    (Farm("uniform", 2), "1"),
    (Farm("uniform", 4), "4N"),
    (Farm("uniform", 8, "lru"), "N"),
    (Farm("flags", 4), "N"),
    (Farm("mixed", 16), "N"),
    (Farm("mixed", 4, "gateway"), "4N"),
    (Farm("mixed", 4), "1"),
)
"""The default grid's farms and catalogues: every farm kind, 2 to 16 workers, K = 1, N and 4N,
every cache mode (cards as the gateway launches them: H200s keeping four checkpoints), and
one checkpoint on fast and slow cards (the common farm of one model, where every card holds
it and placement is only which card and when)."""
BIG_BATCHES = {"batch500": (1, 2, 6), "batch2000": (1,)}
"""Which of REGIMES also get the larger batches (by index)."""


def default_grid() -> list[Cell]:
    out = [cell for farm, k_rule in REGIMES for cell in cells(CHEAP, farm, k_rule)]
    for shape, regimes in BIG_BATCHES.items():
        out += [Cell(SHAPE[shape], *REGIMES[i]) for i in regimes]
    return out


def quick_grid() -> list[Cell]:
    mixed2, mixed4 = Farm("mixed", 2), Farm("mixed", 4)
    return [
        *cells(("sequential", "burst4"), mixed2, "4N"),
        *cells(("batch100", "poisson50", "session"), mixed4, "N"),
        Cell(SHAPE["poisson80"], Farm("uniform", 4, "lru"), "4N"),
    ]


def full_grid() -> list[Cell]:
    farms = [
        Farm(kind, workers, cache)
        for kind in ("uniform", "mixed")
        for workers in (2, 4, 8, 16)
        for cache in ("classic", "lru")
    ]
    farms += [Farm("flags", workers) for workers in (2, 4, 8, 16)]
    return [Cell(shape, farm, k) for shape in SHAPES for farm in farms for k in K_RULES]


def grid(name: str) -> list[Cell]:
    return {"quick": quick_grid, "default": default_grid, "full": full_grid}[name]()


def at_seeds(cell: Cell, grid_name: str, seeds: int) -> list[Scenario]:
    base = cell.scenario(grid_name, 0)
    return [replace(base, seed=seed) for seed in range(seeds)]
