"""Each job's phase ledger, end to end: emulated workers, real Redis, the gateway's clock."""

from __future__ import annotations

from pathlib import Path

from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    txt2img,
)
from workers.supervisor import FarmLayout, WorkerHandle

PHASES = {"load", "encode", "sample", "decode", "save", "other"}


async def test_every_finished_job_has_a_phase_ledger_in_its_record_and_history(
    redis_url: str, tmp_path: Path, emulators: list[WorkerHandle], farm_layout: FarmLayout
) -> None:
    settings = gateway_settings(redis_url, tmp_path)
    async with running_gateway(settings, as_external(emulators[:1]), farm_layout.input_dir) as url:
        client = ComfyStyleClient(url)
        await client.open()
        try:
            ledgers = []
            for seed in (1, 2):
                prompt = txt2img(CHECKPOINTS[2], "ledger", seed=seed, steps=4, size=256)
                job_id = await client.queue_prompt(prompt)
                entry = await client.wait(job_id)
                job = await client.job(job_id)
                assert entry["gateway"]["ledger"] == job["ledger"]
                ledgers.append(job["ledger"])
        finally:
            await client.close()
    first, second = ledgers
    for ledger in ledgers:
        assert ledger["worker"] == emulators[0].spec.name
        assert ledger["group"] == "default"
        assert ledger["state"] == "success"
        assert ledger["family"] == "sdxl"
        assert ledger["timed"] is True
        assert set(ledger["phases"]) == PHASES
        assert ledger["phases"]["sample"] > 0
        assert abs(sum(ledger["phases"].values()) - ledger["exec_s"]) < 1e-3
        assert ledger["queue_s"] >= 0 and ledger["dispatch_s"] >= 0
        assert ledger["total_s"] >= ledger["exec_s"]
        assert ledger["outputs"] and ledger["outputs"][0]["subfolder"] == ledger["worker"]
    # a new seed, same graph: the same shape; the checkpoint stayed loaded
    assert first["shape"] == second["shape"]
    assert first["inputs"] != second["inputs"]
    assert second["process_job"] == first["process_job"] + 1
    assert second["loaded"] is False and "4" in second["cached"]
    assert second["cold"] is False
