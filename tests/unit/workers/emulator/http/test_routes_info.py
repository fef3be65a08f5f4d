"""Listing routes and the middleware layer in process (PROTOCOL.md 1, 1.6, 1.7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.unit.workers.emulator.conftest import CHECKPOINTS, Factory, run_to_history, wait_for
from tests.unit.workers.emulator.running import txt2img
from workers.comfy.flags import LaunchFlags
from workers.emulator.http.state import Emulator

pytestmark = pytest.mark.timeout(30)

RECORDED = Path(__file__).resolve().parents[5] / "workers" / "emulator" / "data"
MIB = 1024 * 1024


def recorded(name: str) -> object:
    return json.loads((RECORDED / name).read_text())


async def test_object_info_lists_this_instances_checkpoints(client: httpx.AsyncClient) -> None:
    info = (await client.get("/object_info")).json()
    assert len(info) == 472
    assert info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"][0] == sorted(
        CHECKPOINTS
    )
    assert info["LoadImage"]["input"]["required"]["image"][0] == []
    assert (await client.get("/api/object_info")).json() == info
    original = recorded("object_info.json")
    assert isinstance(original, dict)
    assert info["KSampler"] == original["KSampler"]


async def test_object_info_of_one_class(client: httpx.AsyncClient) -> None:
    one = await client.get("/object_info/SaveImage")
    assert list(one.json()) == ["SaveImage"]
    unknown = await client.get("/object_info/NoSuchNode")
    assert (unknown.status_code, unknown.json()) == (200, {})


async def test_system_stats_follow_the_profile_and_resident_models(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    def device(stats: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = stats["devices"][0]
        return entry

    idle = (await client.get("/system_stats")).json()
    assert idle["system"]["comfyui_version"] == "0.3.64"
    assert idle["system"]["argv"] == ["main.py"]
    assert device(idle)["name"] == "cuda:0 NVIDIA H200 : cudaMallocAsync"
    total = 143156 * MIB
    assert device(idle)["vram_total"] == device(idle)["vram_free"] == total
    await run_to_history(client, {"prompt": txt2img(ckpt="sd_xl_base_1.0.safetensors")})
    loaded = (await client.get("/system_stats")).json()
    assert device(loaded)["vram_free"] == total - 6619 * MIB
    await client.post("/free", json={"unload_models": True})
    await wait_for(lambda: not emulator.engine.residency.resident())
    freed = (await client.get("/api/system_stats")).json()
    assert device(freed)["vram_free"] == total


async def test_cpu_mode_reports_the_host_as_device(make_app: Factory) -> None:
    client, _ = await make_app(flags=LaunchFlags.parse(["--cpu"]), argv=("main.py", "--cpu"))
    stats = (await client.get("/system_stats")).json()
    assert (stats["devices"][0]["name"], stats["devices"][0]["index"]) == ("cpu", None)
    assert stats["system"]["argv"] == ["main.py", "--cpu"]


async def test_features_carry_the_upload_cap(make_app: Factory) -> None:
    default, _ = await make_app()
    body = (await default.get("/features")).json()
    assert body == {"supports_preview_metadata": True, "max_upload_size": 104857600}
    smaller, _ = await make_app(max_upload_mb=50.0)
    assert (await smaller.get("/features")).json()["max_upload_size"] == 52428800.0


async def test_model_listings(client: httpx.AsyncClient) -> None:
    assert (await client.get("/models")).json() == recorded("models.json")
    assert (await client.get("/models/checkpoints")).json() == sorted(CHECKPOINTS)
    assert (await client.get("/api/models/loras")).json() == []
    assert (await client.get("/models/configs")).json() == recorded("model_configs.json")
    missing = await client.get("/models/nope")
    assert (missing.status_code, missing.content) == (404, b"")
    assert (await client.get("/embeddings")).json() == []
    assert (await client.get("/extensions")).json() == []
    metadata = await client.get("/view_metadata/checkpoints", params={"filename": CHECKPOINTS[0]})
    assert metadata.status_code == 404


async def test_json_bodies_are_serialised_as_aiohttp_does(client: httpx.AsyncClient) -> None:
    response = await client.get("/prompt")
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.content == b'{"exec_info": {"queue_remaining": 0}}'


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("127.0.0.1:8188", "http://127.0.0.1:9000", 403),
        ("127.0.0.1:8188", "http://127.0.0.1:8188", 200),
        ("localhost:8188", "http://localhost", 200),
        ("localhost:8188", "http://evil.example", 403),
        ("[::1]:8188", "http://[::1]:8188", 200),
        ("example.com:8188", "http://elsewhere:1", 200),
        ("127.0.0.1:8188", None, 200),
    ],
)
async def test_origin_check(
    client: httpx.AsyncClient, host: str, origin: str | None, status: int
) -> None:
    headers = {"Host": host} | ({"Origin": origin} if origin else {})
    response = await client.get("/prompt", headers=headers)
    assert response.status_code == status
    if status == 403:
        assert response.content == b""
        assert "content-type" not in response.headers


async def test_cors_mode_replaces_the_origin_check(make_app: Factory) -> None:
    client, _ = await make_app(cors_origin="*")
    headers = {"Host": "127.0.0.1:8188", "Origin": "http://127.0.0.1:9000"}
    response = await client.get("/prompt", headers=headers)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-allow-credentials"] == "true"


async def test_options_is_an_empty_200_everywhere(client: httpx.AsyncClient) -> None:
    for path in ("/prompt", "/no/such/path"):
        response = await client.options(path)
        assert (response.status_code, response.content) == (200, b"")
        assert "content-type" not in response.headers


async def test_bodies_over_the_cap_get_413(make_app: Factory) -> None:
    client, _ = await make_app(max_upload_mb=0.001)
    response = await client.post("/prompt", content=b"x" * 5000)
    assert response.status_code == 413
    assert response.text.startswith("Maximum request body size 1049 exceeded, actual body size")
    upload = await client.post(
        "/upload/image", files={"image": ("a.png", b"y" * 5000, "image/png")}
    )
    assert upload.status_code == 413
    assert (await client.post("/prompt", json={"prompt": {}})).status_code == 400


async def test_refuse_503_spares_the_control_routes(
    client: httpx.AsyncClient, emulator: Emulator
) -> None:
    emulator.faults.update({"refuse": "503"})
    refused = await client.get("/prompt")
    assert (refused.status_code, refused.content) == (503, b"")
    assert (await client.get("/emulator/state")).status_code == 200
    await client.delete("/emulator/faults")
    assert (await client.get("/prompt")).status_code == 200
