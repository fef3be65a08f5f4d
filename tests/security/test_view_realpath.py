"""/view resolves real paths: a symlink planted in an output or input folder (to a file or a
folder) that leads outside it is refused with ComfyUI's bare 403; one within is served."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import as_external, gateway_settings
from tests.security.served import served_gateway
from workers.supervision.launch import FarmLayout, WorkerHandle

pytestmark = pytest.mark.timeout(30)

SECRET = Path("/etc/passwd")


@pytest.fixture
async def http(
    redis_url: str,
    tmp_path: Path,
    security_workers: list[WorkerHandle],
    security_layout: FarmLayout,
) -> AsyncIterator[httpx.AsyncClient]:
    settings = gateway_settings(redis_url, tmp_path)
    async with (
        served_gateway(settings, as_external(security_workers), security_layout) as (url, _),
        httpx.AsyncClient(base_url=url, timeout=15) as client,
    ):
        yield client


@pytest.fixture
def planted(security_layout: FarmLayout) -> Iterator[FarmLayout]:
    """Links in bad0's output folder and the shared input folder; removed afterwards."""
    output = security_layout.output_dir("bad0")
    links = {
        output / "leak.png": SECRET,
        output / "etc": SECRET.parent,
        security_layout.input_dir / "leak_in.png": SECRET,
        output / "inside.png": output / "real.png",
    }
    (output / "real.png").write_bytes(b"\x89PNG fake")
    for link, target in links.items():
        link.symlink_to(target)
    yield security_layout
    for link in [*links, output / "real.png"]:
        link.unlink()


@pytest.mark.parametrize(
    "params",
    [
        {"filename": "leak.png", "type": "output", "subfolder": "bad0"},
        {"filename": "passwd", "type": "output", "subfolder": "bad0/etc"},
        {"filename": "leak_in.png", "type": "input"},
    ],
    ids=["file-link-in-output", "folder-link-in-output", "file-link-in-input"],
)
async def test_a_symlink_leading_out_of_its_folder_is_refused_with_403(
    http: httpx.AsyncClient, planted: FarmLayout, params: dict[str, str]
) -> None:
    answer = await http.get("/view", params=params)
    assert answer.status_code == 403, answer.text[:200]
    assert b"root:" not in answer.content


async def test_a_symlink_within_the_folder_is_served(
    http: httpx.AsyncClient, planted: FarmLayout
) -> None:
    params = {"filename": "inside.png", "type": "output", "subfolder": "bad0"}
    answer = await http.get("/view", params=params)
    assert answer.status_code == 200, answer.text[:200]
    assert answer.content == b"\x89PNG fake"
