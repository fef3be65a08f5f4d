"""A/B experiments end to end: two emulated rtx4070ti groups that differ only in VAE precision,
real Redis, the gateway splitting the traffic and reporting."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.integration.clients import ComfyStyleClient
from tests.integration.conftest import (
    CHECKPOINTS,
    as_external,
    gateway_settings,
    running_gateway,
    start_emulators,
    stop_emulators,
    txt2img,
)
from workers.supervision.launch import FarmLayout, WorkerHandle

TOKEN = "ab-token"
TIME_SCALE = 0.5
BATCH = 8
MAX_JOBS = 160


@pytest.fixture
def vae_groups(tmp_path: Path) -> Iterator[list[WorkerHandle]]:
    layout = FarmLayout(tmp_path / "workers", tmp_path / "input", TIME_SCALE)
    fp32 = start_emulators(layout, ["vae32"], group="fp32vae", args=("--fp32-vae",))
    try:
        fp16 = start_emulators(layout, ["vae16"], group="fp16vae", args=("--fp16-vae",))
    except BaseException:
        stop_emulators(fp32)
        raise
    yield [*fp32, *fp16]
    stop_emulators([*fp32, *fp16])


@pytest.mark.slow  # a live A/B run; tests/unit/gateway/ledger covers the statistics
async def test_the_report_names_the_faster_group_and_its_phase(
    redis_url: str, tmp_path: Path, vae_groups: list[WorkerHandle]
) -> None:
    # Idle keep-alive connections kept while a batch runs: on a busy machine a batch outlasts
    # the default 5 s, and a request sent as the server closes its connection fails.
    settings = gateway_settings(
        redis_url, tmp_path, auth_token=TOKEN, policy="affinity", keep_alive_timeout_s=120.0
    )
    async with running_gateway(settings, as_external(vae_groups), tmp_path / "input") as url:
        client = ComfyStyleClient(url, token=TOKEN)
        await client.open()
        try:
            await _experiment_routes(client)
            report, ids = await _run_until_told(client)
            jobs = [await client.job(job_id) for job_id in ids]
            printed = await _cli_report(url, tmp_path / "vae.png")
        finally:
            await client.close()
    # the traffic is split evenly; each job ran in the group chosen for it
    chosen = [job["placement"]["group"] for job in jobs]
    assert abs(chosen.count("fp32vae") - chosen.count("fp16vae")) <= 1
    assert all(job["placement"]["experiment"] == "vae" for job in jobs)
    assert all(job["ledger"]["group"] == job["placement"]["group"] for job in jobs)
    groups = report["groups"]
    assert groups["fp32vae"]["n"] > 10 and groups["fp16vae"]["n"] > 10
    [comparison] = report["comparisons"]
    decode = comparison["measures"]["decode"]
    assert decode["decided"] and decode["interval"][1] < 1.0, decode
    assert decode["ratio"] == pytest.approx(1 / 1.8, rel=0.25)  # the profile's fp32 decode_x
    sample = comparison["measures"]["sample"]
    assert not sample["decided"]  # VAE precision does not touch the sampler
    assert report["verdict"].startswith("fp16vae is faster than fp32vae"), report["verdict"]
    assert "decode" in report["verdict"]
    # the CLI prints the same verdict under its tables, and draws the phases
    assert report["verdict"] in printed.splitlines()
    assert "fp16vae / fp32vae (warm jobs):" in printed
    # ...and the quality guard: SDXL's VAE in fp16 decodes black images on this profile
    quality = {line.split()[0]: line for line in printed.splitlines() if "1024x1024" in line}
    assert quality["fp32vae"].endswith("sound")
    assert quality["fp16vae"].endswith("BROKEN: black image")
    with Image.open(tmp_path / "vae.png") as plot:
        assert plot.format == "PNG" and plot.size[0] > 600


async def _cli_report(url: str, plot: Path) -> str:
    """`comfy-gateway ab report vae`, as a user runs it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "ab",
        "report",
        "vae",
        "--url",
        url,
        "--token",
        TOKEN,
        "--plot",
        str(plot),
        "--quality",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def _experiment_routes(client: ComfyStyleClient) -> None:
    """Adding an experiment: refused without the token, with unknown groups or a bad body."""
    body = {"name": "vae", "groups": ["fp32vae", "fp16vae"]}
    anonymous = await client.http.post(
        "/gateway/experiments", json=body, headers={"Authorization": ""}
    )
    assert anonymous.status_code == 401
    unknown = await client.http.post(
        "/gateway/experiments", json={"name": "x", "groups": ["fp32vae", "nope"]}
    )
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]
    bad = await client.http.post("/gateway/experiments", json={"name": "x", "groups": ["a"]})
    assert bad.status_code == 400 and "groups" in bad.json()["error"]
    added = await client.http.post("/gateway/experiments", json=body)
    assert added.status_code == 200, added.text
    listed = (await client.http.get("/gateway/experiments")).json()["experiments"]
    assert [(e["name"], e["source"]) for e in listed] == [("vae", "api")]
    missing = await client.http.get("/gateway/ab", params={"experiment": "other"})
    assert missing.status_code == 404
    pinned = await client.post(_prompt(0), extra_data={"gateway": {"group": "nope"}})
    assert pinned.status_code == 400
    assert pinned.json()["error"]["type"] == "invalid_group"
    assert "fp16vae" in pinned.json()["error"]["message"]


async def _run_until_told(client: ComfyStyleClient) -> tuple[dict[str, Any], list[str]]:
    """Jobs in batches until the report calls a winner (at most `MAX_JOBS`): the report and
    the jobs' ids."""
    report: dict[str, Any] = {}
    sent: list[str] = []
    for start in range(1, MAX_JOBS, BATCH):
        ids = [await client.queue_prompt(_prompt(seed)) for seed in range(start, start + BATCH)]
        await asyncio.gather(*(client.wait(job_id, timeout_s=60) for job_id in ids))
        sent += ids
        report = (await client.http.get("/gateway/ab", params={"experiment": "vae"})).json()
        if "is faster" in report["verdict"]:
            break
    print(f"after {len(sent)} jobs: {report['verdict']}")
    return report, sent


def _prompt(seed: int) -> dict[str, Any]:
    return txt2img(CHECKPOINTS[2], "ab", seed=seed, steps=2, size=1024)
