"""The farm's limit on work per job (`max_job_work`): a ComfyUI-valid 16384x16384 batch-4096
prompt is refused at POST /prompt with ComfyUI's 400 shape naming the sampler and the limit,
and not queued; a large normal workflow stays well inside the default."""

from __future__ import annotations

import httpx
import pytest

from gateway.api.work_limit import check_work
from gateway.settings import Settings
from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(30)


def _prompt(size: int, batch: int, steps: int) -> dict[str, object]:
    prompt = txt2img(CHECKPOINTS[0], "work", steps=steps, size=size)
    prompt["5"]["inputs"]["batch_size"] = batch
    return prompt


async def test_a_16k_batch_4096_prompt_is_refused_naming_the_sampler_and_the_limit(
    gateway: httpx.AsyncClient,
) -> None:
    answer = await gateway.post("/prompt", json={"prompt": _prompt(16384, 4096, 20)})
    assert answer.status_code == 400, answer.text[:300]
    body = answer.json()
    assert body["error"]["type"] == "work_limit_exceeded"
    assert "max_job_work" in body["error"]["message"]
    node = body["node_errors"]["3"]
    assert node["class_type"] == "KSampler"
    assert "max_job_work" in node["errors"][0]["details"]
    assert "prompt_id" not in body


async def test_a_small_prompt_is_still_accepted(gateway: httpx.AsyncClient) -> None:
    answer = await gateway.post("/prompt", json={"prompt": _prompt(64, 1, 1)})
    assert answer.status_code == 200, answer.text[:300]


@pytest.mark.parametrize(
    ("size", "batch", "steps"),
    [(1024, 1, 30), (2048, 8, 50), (4000, 64, 150)],
    ids=["sdxl", "hires-batch", "16mp-batch64-150-steps"],
)
def test_normal_workflows_pass_the_default_limit(size: int, batch: int, steps: int) -> None:
    check_work(_prompt(size, batch, steps), Settings.model_fields["max_job_work"].default)
