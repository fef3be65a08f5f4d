"""Placement with the whole farm in view: a node leaves a job to another node's worker that
the policy says finishes it sooner (gateway/peers/lanes.py states the guarantee)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import CHECKPOINTS, txt2img
from tests.multihost.conftest import client_of, nodes

WARM_A, WARM_B = CHECKPOINTS[0], CHECKPOINTS[1]


@pytest.mark.slow  # long; tests/unit/peers checks the guarantee on 300 farms
async def test_a_node_leaves_a_job_to_the_idle_worker_of_another_node_that_holds_its_model(
    redis_url: str, tmp_path: Path
) -> None:
    # Both workers offer every checkpoint; each node warms its worker on another one.
    farm = {"wa": {"preload": [WARM_A]}, "wb": {"preload": [WARM_B]}}
    with nodes(redis_url, tmp_path, farm) as (a, b):
        async with client_of(b.url) as on_b, client_of(a.url) as on_a:
            for_a = [await on_b.queue_prompt(txt2img(WARM_A, "a", seed=s)) for s in range(2)]
            for_b = [await on_a.queue_prompt(txt2img(WARM_B, "b", seed=s)) for s in range(2)]
            ran_a = [(await on_b.wait(p))["gateway"]["worker"] for p in for_a]
            ran_b = [(await on_a.wait(p))["gateway"]["worker"] for p in for_b]
    assert ran_a == ["wa", "wa"]
    assert ran_b == ["wb", "wb"]
