"""Which checkpoint a cold idle worker warms up on (`gateway.scheduler.warming`)."""

from __future__ import annotations

import pytest

from gateway.scheduler.snapshot import JobView, WorkerView
from gateway.scheduler.warming import warm_ups
from tests.unit.gateway.scheduler.factories import job, worker

A, B, C = "a.safetensors", "b.safetensors", "c.safetensors"
COLD1, COLD2 = worker("cold1"), worker("cold2")


def latest(*jobs: JobView) -> dict[str, JobView]:
    return {j.checkpoint: j for j in jobs if j.checkpoint}


CASES = [
    pytest.param([COLD1], [COLD1], latest(), {}, [], id="no job seen yet: nothing to warm on"),
    pytest.param(
        [COLD1],
        [COLD1, worker("w", (A,))],
        latest(job("1", A)),
        {A: 0.1},
        [("cold1", A)],
        id="the only checkpoint asked for, although a worker holds it",
    ),
    pytest.param(
        [COLD1],
        [COLD1, worker("w", (A,))],
        latest(job("1", A), job("2", B)),
        {A: 0.5, B: 0.1},
        [("cold1", B)],
        id="what no worker holds before the more wanted one a worker holds",
    ),
    pytest.param(
        [COLD1, COLD2],
        [COLD1, COLD2],
        latest(job("1", A), job("2", B)),
        {A: 0.5, B: 0.1},
        [("cold1", A), ("cold2", B)],
        id="two cold workers spread over what is asked for, the most wanted first",
    ),
    pytest.param(
        [COLD1, COLD2],
        [COLD1, COLD2, worker("w", (A,))],
        latest(job("1", A)),
        {A: 0.5},
        [("cold1", A), ("cold2", A)],
        id="one checkpoint: every cold worker warms on it",
    ),
    pytest.param(
        [COLD1],
        [COLD1],
        latest(job("1", A, eligible=frozenset({"other"})), job("2", C)),
        {A: 0.5, C: 0.01},
        [("cold1", C)],
        id="never a checkpoint the worker may not run (validation said elsewhere)",
    ),
    pytest.param(
        [worker("cold", group="tune.x")],
        [worker("cold", group="tune.x")],
        latest(job("1", A)),
        {A: 0.5},
        [],
        id="a worker reserved for a tuning group warms on no general traffic",
    ),
    pytest.param(
        [worker("cold", group="tune.x")],
        [worker("cold", group="tune.x")],
        latest(job("1", A, group="tune.x")),
        {A: 0.5},
        [],
        id="nor on the tuner's own jobs: the tuner measures its cold runs",
    ),
]


@pytest.mark.parametrize(("cold", "farm", "seen", "rates", "expected"), CASES)
def test_a_cold_idle_worker_warms_on_what_clients_ask_for_and_may_run_there(
    cold: list[WorkerView],
    farm: list[WorkerView],
    seen: dict[str, JobView],
    rates: dict[str, float],
    expected: list[tuple[str, str]],
) -> None:
    assert warm_ups(cold, farm, seen, rates) == expected
