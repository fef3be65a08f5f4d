"""Each job's phase ledger, end to end: emulated workers, real Redis, the gateway's clock."""

from __future__ import annotations

from pathlib import Path

from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    started_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout, WorkerHandle

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
            metrics = (await client.http.get("/metrics")).text
        finally:
            await client.close()
    first, second = ledgers
    # each timed ledger's phases are observed in the phase histogram
    sampled = [
        line
        for line in metrics.splitlines()
        if line.startswith("comfy_gateway_phase_seconds_count")
        and 'phase="sample"' in line
        and f'worker="{emulators[0].spec.name}"' in line
    ]
    assert sampled and float(sampled[0].rsplit(" ", 1)[1]) >= 1
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


async def test_phase_stats_and_the_diagnosis_of_a_cold_first_job(
    redis_url: str, tmp_path: Path
) -> None:
    # its first job pays the one-time costs; a larger time scale than the shared emulators,
    # so that the gateway's clock times each node well on a busy machine
    layout = FarmLayout(tmp_path / "workers", tmp_path / "input", 0.05)
    settings = gateway_settings(redis_url, tmp_path)
    with started_emulators(layout, ["ledger0"]) as fresh:
        async with running_gateway(settings, as_external(fresh), layout.input_dir) as url:
            client = ComfyStyleClient(url)
            await client.open()
            try:
                for seed in (1, 2, 3):
                    prompt = txt2img(CHECKPOINTS[2], "diag", seed=seed, steps=2, size=128)
                    await client.wait(await client.queue_prompt(prompt))
                body = (await client.http.get("/gateway/phases", params={"by": "shape"})).json()
                bad = await client.http.get("/gateway/phases", params={"by": "colour"})
            finally:
                await client.close()
    assert body["jobs"] == 3
    [shape] = body["groups"].values()
    assert shape["cold"]["exec_s"]["n"] == 1 and shape["warm"]["exec_s"]["n"] == 2
    assert shape["cold"]["load"]["mean"] > shape["warm"]["load"]["mean"]
    [finding] = body["diagnosis"]
    assert finding["worker"] == "ledger0"
    assert finding["verdict"] == "one_time_cost"
    assert finding["first_s"] > 5 * finding["next_s"]
    assert bad.status_code == 400
    assert "by must be one of" in bad.json()["error"]
