"""Estimates of what a worker never measured, from what is known of it and of the farm.

Placement invariant: a worker never measured is priced from what is known, never with a
pessimism that excludes it forever (priced at a default speed far below its card's, it is never
chosen, so never measured). `with_estimates` fills, for every worker, each family's speed (with
its fixed seconds) and each load seconds (by model key or family) that it has not measured and
another worker has, from the first of these that knows it:

1. its own measurements, scaled: its pace against workers that measured the entry and share
   measurements with it (of its own card first) times their value: a card measured at half
   another's speed on sd15 is taken at half that card's speed on sdxl too;
2. the mean of the workers of its card (`WorkerView.card`: its GPU's name and memory, or the
   profile it emulates);
3. the mean of every worker that measured it.

An entry no worker measured stays absent: `cost.speed_of` and `cost.key_load_s` then fall back
to the mean of the worker's other entries, and only with none to the neutral default. Measured
entries are never changed; estimated ones are named in `WorkerView.estimated` and
`estimated_load`, and give way to the worker's own measurement in the next snapshot. The
warm-up's speed probe and load timings are measurements (they seed the worker's own numbers).

Pure: views in, views out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from gateway.scheduler.snapshot import WorkerView

__all__ = ["with_estimates"]

Row = tuple[float, ...]
"""The numbers of one entry: the first compares workers, all scale together."""
Table = Mapping[str, Mapping[str, Row]]
"""Worker name -> entry -> its measured row (usable values only)."""
Ratio = Callable[[str, str], float | None]


def with_estimates(workers: Sequence[WorkerView]) -> tuple[WorkerView, ...]:
    """Every worker with estimates of the speeds and loads it never measured and another
    worker did (same order; measured entries as they were)."""
    if not _lacking(w.speed for w in workers) and not _lacking(w.load_s for w in workers):
        return tuple(workers)  # every worker measured what any measured: nothing to estimate
    cards = {w.name: w.card for w in workers}
    speeds = _filled({w.name: _speed_rows(w) for w in workers}, _measured_speeds(workers), cards)
    loads = _filled({w.name: _load_rows(w) for w in workers}, _measured_loads(workers), cards)
    return tuple(_estimated(w, speeds[w.name], loads[w.name]) for w in workers)


def _lacking(tables: Iterable[Mapping[str, float]]) -> bool:
    """Whether some worker lacks an entry another has."""
    keys = [table.keys() for table in tables]
    union: set[str] = set().union(*keys)
    return any(len(k) != len(union) for k in keys)


def _speed_rows(worker: WorkerView) -> dict[str, Row]:
    """(seconds per work unit, fixed seconds) of each family it measured at a usable speed."""
    return {
        family: (1.0 / speed, worker.fixed_s.get(family, 0.0))
        for family, speed in worker.speed.items()
        if 0.0 < speed < math.inf
    }


def _load_rows(worker: WorkerView) -> dict[str, Row]:
    return {key: (s,) for key, s in worker.load_s.items() if 0.0 < s < math.inf}


def _measured_speeds(workers: Sequence[WorkerView]) -> dict[str, frozenset[str]]:
    return {w.name: frozenset(w.speed) for w in workers}


def _measured_loads(workers: Sequence[WorkerView]) -> dict[str, frozenset[str]]:
    return {w.name: frozenset(w.load_s) for w in workers}


def _estimated(
    worker: WorkerView, speeds: Mapping[str, Row], loads: Mapping[str, Row]
) -> WorkerView:
    if not speeds and not loads:
        return worker
    return replace(
        worker,
        speed={**{f: 1.0 / row[0] for f, row in speeds.items()}, **worker.speed},
        fixed_s={**{f: row[1] for f, row in speeds.items()}, **worker.fixed_s},
        load_s={**{k: row[0] for k, row in loads.items()}, **worker.load_s},
        estimated=frozenset(speeds),
        estimated_load=frozenset(loads),
    )


def _filled(
    table: Table, measured: Mapping[str, frozenset[str]], cards: Mapping[str, str | None]
) -> dict[str, dict[str, Row]]:
    """Worker -> the rows it did not measure and another worker did, estimated."""
    entries = {entry for rows in table.values() for entry in rows}
    ratio = _ratios(table)
    return {
        worker: {
            entry: _estimate(worker, entry, table, cards, ratio)
            for entry in sorted(entries - measured[worker])
        }
        for worker in table
    }


def _estimate(
    worker: str, entry: str, table: Table, cards: Mapping[str, str | None], ratio: Ratio
) -> Row:
    """The row of `entry` for `worker`, from at least one other worker that measured it."""
    holders = [other for other in table if other != worker and entry in table[other]]
    card = cards.get(worker)
    alike = [other for other in holders if card is not None and cards.get(other) == card]
    for references in (alike, holders):
        scaled = []
        for other in references:
            factor = ratio(worker, other)
            if factor is not None:
                scaled.append(tuple(factor * value for value in table[other][entry]))
        if scaled:
            return _mean(scaled)
    return _mean([table[other][entry] for other in alike or holders])


def _ratios(table: Table) -> Ratio:
    """The pace of one worker against another: the geometric mean of the ratios of their
    first numbers over the entries both measured (None: none in common). Memoised."""
    known: dict[tuple[str, str], float | None] = {}

    def ratio(worker: str, other: str) -> float | None:
        if (worker, other) not in known:
            mine, theirs = table[worker], table[other]
            logs = [math.log(mine[e][0] / theirs[e][0]) for e in mine.keys() & theirs.keys()]
            known[(worker, other)] = math.exp(sum(logs) / len(logs)) if logs else None
        return known[(worker, other)]

    return ratio


def _mean(rows: Iterable[Row]) -> Row:
    listed = list(rows)
    return tuple(sum(column) / len(listed) for column in zip(*listed, strict=True))
