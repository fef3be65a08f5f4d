"""A restarted worker's file lists reach the farm's object_info without waiting for the
scheduled refresh."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.contract import images
from tests.faults.farms import AUTH, emulated, farm_settings, supervised_gateway

pytestmark = pytest.mark.timeout(60)


async def test_a_restarted_worker_is_asked_for_its_object_info_again(
    redis_url: str, tmp_path: Path
) -> None:
    settings = farm_settings(redis_url, tmp_path, [emulated("a")], catalog_refresh_s=3600)
    async with supervised_gateway(settings) as farm:

        async def listed() -> list[str]:
            info = (await farm.http.get("/object_info/LoadImage")).json()
            names: list[str] = info["LoadImage"]["input"]["required"]["image"][0]
            return names

        # Copied into the inputs behind the gateway's back (not uploaded through it).
        (tmp_path / "input").mkdir(exist_ok=True)
        (tmp_path / "input" / "copied.png").write_bytes(images.png((9, 9, 9)))
        assert "copied.png" not in await listed()
        restarted = await farm.http.post("/gateway/workers/a/restart", headers=AUTH)
        assert restarted.status_code == 200, restarted.text
        await farm.until_worker("a", state="ready", restarts=1)
        deadline_s = asyncio.get_running_loop().time() + 10
        while "copied.png" not in await listed():
            assert asyncio.get_running_loop().time() < deadline_s, "never listed after restart"
            await asyncio.sleep(0.05)
