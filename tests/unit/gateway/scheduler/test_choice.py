"""How `affinity` chooses among one worker's options (`choice.choose`): its warm work unless a
load earns the switch, and among the loads that do, the one that shortens its queue most."""

from __future__ import annotations

import math

import pytest

from gateway.scheduler.affinity.choice import Option, Ranked, choose
from gateway.scheduler.affinity.state import Queue
from gateway.scheduler.affinity.tuning import Tuning
from tests.unit.gateway.scheduler.factories import job

QUEUE = Queue((job("j", "m1"),), 1, 10.0, 0.0, frozenset(("m1",)), 0.0)


def option(
    *, warm: bool = False, ratio: float, gain_s: float = math.inf, priority: int = 0
) -> Option:
    """An option with the given response ratio: 1 s of cost, (ratio - 1) s waited."""
    return Option(
        queue=QUEUE,
        warm=warm,
        load_s=0.0 if warm else 0.5,
        evict_s=0.0,
        jobs=1.0,
        run_s=1.0 if warm else 0.5,
        waited_s=ratio - 1.0,
        advantage=1.0,
        priority=priority,
        gain_s=gain_s,
    )


def queue_load(*, jobs: int, waited_each_s: float, gain_s: float = math.inf) -> Option:
    """A load of 0.5 s for a share of `jobs` jobs of 1 s each, every one waited
    `waited_each_s`."""
    return Option(
        queue=QUEUE,
        warm=False,
        load_s=0.5,
        evict_s=0.0,
        jobs=float(jobs),
        run_s=float(jobs),
        waited_s=jobs * waited_each_s,
        advantage=1.0,
        priority=0,
        gain_s=gain_s,
    )


LONE = queue_load(jobs=1, waited_each_s=5.0)
"""Response ratio (5 + 1.5) / 1.5 = 4.3; over its first job's cost the same."""
CROWD = queue_load(jobs=10, waited_each_s=3.0)
"""Response ratio (30 + 10.5) / 10.5 = 3.9, below the lone job's; over its first job's cost
(0.5 + 1 s) 27: one load serves ten jobs."""


WARM = option(warm=True, ratio=2.0)
"""Warm work with ratio 2: a load of its priority must reach 4 x 2 = 8 (`switch_ratio` 4)."""

# (what, the options in queue order, the index of the chosen one; None: nothing)
CHOICES: dict[str, tuple[list[Option], int | None]] = {
    "nothing to do": ([], None),
    "warm work alone": ([WARM], 0),
    "a load that does not earn the switch leaves the warm work first": (
        [WARM, option(ratio=7.9, gain_s=5.0)],
        0,
    ),
    "a load of the warm work's ratio x 4 is taken over it": (
        [WARM, option(ratio=8.0, gain_s=5.0)],
        1,
    ),
    "a load that cannot earn the switch does not hide one that does, however great its gain": (
        [WARM, option(ratio=3.0, gain_s=50.0), option(ratio=9.0, gain_s=1.0)],
        2,
    ),
    "among the loads that earn it, the greatest gain": (
        [WARM, option(ratio=20.0, gain_s=1.0), option(ratio=9.0, gain_s=3.0)],
        2,
    ),
    "with no warm work, a queue no one holds (gain inf) before helping one": (
        [option(ratio=1.5, gain_s=4.0), option(ratio=1.2)],
        1,
    ),
    "with no warm work, equal gains go to the higher ratio": (
        [option(ratio=1.5, gain_s=4.0), option(ratio=3.0, gain_s=4.0)],
        1,
    ),
    "among queues no one holds, ten jobs that waited 3 s each before a lone job that waited 5 s": (
        [LONE, CROWD],
        1,
    ),
    "the lone job's turn comes: once it has waited 40 s it goes first": (
        [queue_load(jobs=1, waited_each_s=40.0), CROWD],
        0,
    ),
    "a gain still comes before the ratio over the first job": (
        [
            queue_load(jobs=1, waited_each_s=5.0, gain_s=3.0),
            queue_load(jobs=10, waited_each_s=3.0, gain_s=2.0),
        ],
        0,
    ),
    "a load of a higher priority is taken over warm work whatever its ratio": (
        [WARM, option(ratio=1.0, gain_s=1.0, priority=1)],
        1,
    ),
    "a load of a lower priority never is": ([WARM, option(ratio=99.0, priority=-1)], 0),
}


@pytest.mark.parametrize(("options", "chosen"), CHOICES.values(), ids=CHOICES.keys())
def test_a_worker_switches_from_warm_work_only_for_a_load_that_earns_it(
    options: list[Option], chosen: int | None
) -> None:
    ranked: list[Ranked] = [(o, i) for i, o in enumerate(options)]
    got = choose(ranked, Tuning())
    assert (None if got is None else got[1]) == chosen
