"""Poison prompts (workflows that crash whatever worker runs them) are quarantined, and nobody
else pays for them: the jobs sent ahead to a crashing worker are not charged an attempt, and
the workers, restarted after each crash, are never marked failed or flapping for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.faults.farms import Farm, emulated, farm_settings, supervised_gateway
from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(90)

MARK = "POISON-PILL"
POISONOUS = ("--fault", f"poison={MARK}")


def _prompt(kind: str, seed: int) -> dict[str, Any]:
    prompt = txt2img(CHECKPOINTS[0], kind, seed=seed, steps=3)
    if kind == "poison":
        prompt["6"]["inputs"]["text"] = f"an apple {MARK}"
    return prompt


async def _submit(farm: Farm, kind: str, seed: int) -> str:
    answer = await farm.http.post("/prompt", json={"prompt": _prompt(kind, seed)})
    assert answer.status_code == 200, answer.text
    prompt_id: str = answer.json()["prompt_id"]
    return prompt_id


async def test_poison_prompts_are_quarantined_and_charge_no_one_else(
    redis_url: str, tmp_path: Path
) -> None:
    workers = [emulated("p0", args=POISONOUS), emulated("p1", args=POISONOUS)]
    settings = farm_settings(redis_url, tmp_path, workers)
    async with supervised_gateway(settings) as farm:
        ids: dict[str, list[str]] = {"poison": [], "innocent": []}
        for seed, kind in enumerate(["poison", "innocent", "innocent", "poison", "innocent"]):
            ids[kind].append(await _submit(farm, kind, seed))
        for job_id in ids["innocent"]:
            done = await farm.until_job(job_id, "success", timeout_s=60)
            assert done["failures"] == 0, done  # sent ahead to a crashing worker: not charged
        for job_id in ids["poison"]:
            record = await farm.until_job(job_id, "quarantined", timeout_s=60)
            assert record["crashes"] == 2, record
            assert MARK in record["prompt"]["6"]["inputs"]["text"]  # kept for inspection
            entry = (await farm.http.get(f"/history/{job_id}")).json()[job_id]
            error = entry["status"]["messages"][-1][1]
            assert error["exception_type"] == "GatewayQuarantined"
            assert f"/gateway/jobs/{job_id}" in error["exception_message"]
        for name in ("p0", "p1"):
            record = await farm.until_worker(name, state="ready")
            assert record["restarts"] >= 1
        restarts = sum([(await farm.worker(name))["restarts"] for name in ("p0", "p1")])
        assert restarts == 4, "one restart per crash: each poison prompt crashed twice"
        after = await _submit(farm, "innocent", 99)
        await farm.until_job(after, "success", timeout_s=20)
