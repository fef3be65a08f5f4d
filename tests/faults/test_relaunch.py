"""Relaunching a worker with other launch args or in another group (what the tuner does),
with real processes: the gateway, its supervised emulated workers, Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.farms import emulated, farm_settings, supervised_gateway
from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(90)
NO_AUTH = {"Authorization": ""}


async def test_a_worker_relaunched_in_a_tuning_group_takes_only_jobs_pinned_to_it(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path / "data", [emulated("w0"), emulated("w1")])
    async with supervised_gateway(settings) as farm:
        await farm.until_worker("w0", phase="ready")
        await farm.until_worker("w1", phase="ready")
        url = "/gateway/workers/w0/relaunch"
        anonymous = await farm.http.post(url, json={"group": "x"}, headers=NO_AUTH)
        assert anonymous.status_code == 401
        clash = await farm.http.post(url, json={"args": ["--fp16-vae", "--fp32-vae"]})
        assert clash.status_code == 400 and "not allowed with" in clash.json()["error"]
        bad_group = await farm.http.post(url, json={"group": "a b"})
        assert bad_group.status_code == 400
        missing = await farm.http.post("/gateway/workers/nope/relaunch", json={})
        assert missing.status_code == 404

        answer = await farm.http.post(url, json={"args": ["--fp32-vae"], "group": "tune.w0"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["previous"] == {"args": [], "group": "default"}
        record = await farm.until_worker("w0", phase="ready", state="ready", group="tune.w0")
        assert "--fp32-vae" in record["args"]

        for seed in range(4):  # unpinned: never on the worker being tuned
            job_id = (await farm.http.post("/prompt", json={"prompt": _prompt(seed)})).json()
            done = await farm.until_job(job_id["prompt_id"], "success")
            assert done["worker"] == "w1"
        pinned = {"prompt": _prompt(9), "extra_data": {"gateway": {"group": "tune.w0"}}}
        job_id = (await farm.http.post("/prompt", json=pinned)).json()["prompt_id"]
        done = await farm.until_job(job_id, "success")
        assert done["worker"] == "w0" and done["ledger"]["args"] == ["--fp32-vae"]

        back = await farm.http.post(url, json={"args": [], "group": "default"})
        assert back.status_code == 200
        record = await farm.until_worker("w0", phase="ready", state="ready", group="default")
        assert "--fp32-vae" not in record["args"]


def _prompt(seed: int) -> dict[str, object]:
    return txt2img(CHECKPOINTS[0], "relaunch", seed=seed, steps=1, size=64)
