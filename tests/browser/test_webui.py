"""The ComfyUI web frontend through the gateway, in a real headless Chromium: a farm of two
emulated workers behind `comfy-gateway serve`, the editor at `/`, a workflow queued with its
Run button, its progress in the tab title and its image on the SaveImage node.

`UPDATE_SCREENSHOTS=1` also writes the screenshot to docs/webui.png (the README's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import Console
from tests.faults.farms import GatewayProcess, gateway_process
from tests.integration.conftest import CHECKPOINTS

DOCS = Path(__file__).parents[2] / "docs"
TIME_SCALE = 0.1
STEPS = 60
"""Enough steps at this time scale that the run's progress is on screen for about a second."""

ABSENT_BY_DESIGN = (
    # The frontend asks for optional user files; ComfyUI answers 404 for a fresh user too.
    "/user.css",
    "/api/userdata/user.css",
    "/api/userdata/comfy.templates.json",
    "/api/userdata?dir=workflows&",
    "/api/userdata?dir=subgraphs&",
    # Workflow templates come from the workers' comfyui-workflow-templates package; the
    # emulated workers ship none (a real ComfyUI worker serves them through the gateway).
    "/templates/index",
)
FRONTEND_ONLY_ERRORS = (
    # The frontend looks for releases and news on api.comfy.org; this machine has no Internet.
    "net::ERR_NAME_NOT_RESOLVED",
    "net::ERR_INTERNET_DISCONNECTED",
    # Follows the 404 of /templates/index.json above (emulated workers, no templates).
    "Error loading core workflow templates",
)
RESOURCE_ERROR = "Failed to load resource: the server responded with a status of"
"""Each such console line is a response the request log checks by its URL."""

SAVE_NODE = 9
PAGE_LOAD_MS = 90_000
"""The editor is some 30 MB of scripts: it took 20-40 s to load on two cores shared with a
load average of 10."""


def classic_txt2img(checkpoint: str) -> dict[str, Any]:
    """SD1.5 text to image in the editor's format (the emulated workers run checkpoints; the
    frontend's own default graph, Z-Image with separate model files, needs files they lack)."""

    def node(
        id_: int, type_: str, ins: list[Any], outs: list[Any], widgets: list[Any], at: Any
    ) -> dict[str, Any]:
        inputs = [{"name": n, "type": t, "link": link} for n, t, link in ins]
        outputs = [{"name": n, "type": t, "links": links} for n, t, links in outs]
        size = [320, 360] if id_ == SAVE_NODE else [300, 150]
        return {
            "id": id_, "type": type_, "pos": list(at), "size": size,
            "flags": {}, "order": id_, "mode": 0, "inputs": inputs, "outputs": outputs,
            "properties": {}, "widgets_values": widgets,
        }  # fmt: skip

    nodes = [
        node(4, "CheckpointLoaderSimple", [],
             [("MODEL", "MODEL", [1]), ("CLIP", "CLIP", [3, 5]), ("VAE", "VAE", [8])],
             [checkpoint], (0, 200)),
        node(6, "CLIPTextEncode", [("clip", "CLIP", 3)], [("CONDITIONING", "CONDITIONING", [4])],
             ["a lighthouse on a cliff at dawn"], (340, 0)),
        node(7, "CLIPTextEncode", [("clip", "CLIP", 5)], [("CONDITIONING", "CONDITIONING", [6])],
             ["blurry"], (340, 200)),
        node(5, "EmptyLatentImage", [], [("LATENT", "LATENT", [2])], [512, 512, 1], (340, 400)),
        node(3, "KSampler",
             [("model", "MODEL", 1), ("positive", "CONDITIONING", 4),
              ("negative", "CONDITIONING", 6), ("latent_image", "LATENT", 2)],
             [("LATENT", "LATENT", [7])], [42, "fixed", STEPS, 8, "euler", "normal", 1],
             (680, 100)),
        node(8, "VAEDecode", [("samples", "LATENT", 7), ("vae", "VAE", 8)],
             [("IMAGE", "IMAGE", [9])], [], (1020, 100)),
        node(SAVE_NODE, "SaveImage", [("images", "IMAGE", 9)], [], ["ComfyUI"], (1020, 240)),
    ]  # fmt: skip
    links = [
        [1, 4, 0, 3, 0, "MODEL"], [2, 5, 0, 3, 3, "LATENT"], [3, 4, 1, 6, 0, "CLIP"],
        [4, 6, 0, 3, 1, "CONDITIONING"], [5, 4, 1, 7, 0, "CLIP"], [6, 7, 0, 3, 2, "CONDITIONING"],
        [7, 3, 0, 8, 0, "LATENT"], [8, 4, 2, 8, 1, "VAE"], [9, 8, 0, 9, 0, "IMAGE"],
    ]  # fmt: skip
    return {"last_node_id": 9, "last_link_id": 9, "nodes": nodes, "links": links,
            "groups": [], "config": {}, "extra": {}, "version": 0.4}  # fmt: skip


@pytest.fixture
def farm(redis_url: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    pytest.importorskip("comfyui_frontend_package")
    config = tmp_path / "farm.toml"
    checkpoints = json.dumps(list(CHECKPOINTS))
    workers = "".join(
        f'[[workers]]\nname = "web{i}"\nemulate = "rtx4070ti"\ncheckpoints = {checkpoints}\n'
        for i in range(2)
    )
    config.write_text(f"time_scale = {TIME_SCALE}\nwarmup_probe_steps = 0\n{workers}")
    with gateway_process(config, redis_url, tmp_path / "node", ready_timeout_s=90) as gateway:
        yield gateway


def refused(responses: list[tuple[str, int, str]], origin: str) -> list[str]:
    """The gateway's answers of 400 and above that no allow-list entry explains."""
    return [
        f"{method} {status} {url}"
        for method, status, url in responses
        if status >= 400
        and url.startswith(origin)
        and not url.removeprefix(origin).startswith(ABSENT_BY_DESIGN)
    ]


def unexplained(console: Console) -> list[str]:
    return [
        error
        for error in console.errors
        if RESOURCE_ERROR not in error and not any(known in error for known in FRONTEND_ONLY_ERRORS)
    ]


@pytest.mark.timeout(240)
def test_the_editor_queues_a_workflow_to_the_farm_and_shows_its_image(
    farm: GatewayProcess, page: tuple[Any, Console], tmp_path: Path
) -> None:
    browser_page, console = page
    responses: list[tuple[str, int, str]] = []
    browser_page.on("response", lambda r: responses.append((r.request.method, r.status, r.url)))
    frames: list[str] = []
    browser_page.on(
        "websocket",
        lambda socket: socket.on("framereceived", lambda frame: frames.append(str(frame))),
    )
    origin = f"{urlsplit(farm.url).scheme}://{urlsplit(farm.url).netloc}"

    browser_page.goto(farm.url + "/")
    browser_page.wait_for_selector('[data-testid="queue-button"]', timeout=PAGE_LOAD_MS)
    browser_page.wait_for_function("() => window.app?.graph && window.app.api?.clientId")
    browser_page.keyboard.press("Escape")  # a new user is offered the templates first
    browser_page.evaluate(
        "graph => window.app.loadGraphData(graph)", classic_txt2img(CHECKPOINTS[0])
    )
    with browser_page.expect_response(
        lambda r: urlsplit(r.url).path == "/api/prompt" and r.request.method == "POST"
    ) as queued:
        browser_page.click('[data-testid="queue-button"]')
    assert queued.value.status == 200, queued.value.text()
    prompt_id = queued.value.json()["prompt_id"]

    # Progress: the tab title shows the run's percentage while it executes.
    browser_page.wait_for_function(r"() => /\[[1-9]\d*%\]/.test(document.title)", timeout=20_000)
    # The image: SaveImage shows the output, fetched through the gateway's /view.
    browser_page.wait_for_function(
        f"""() => {{
            const images = window.app.graph.getNodeById({SAVE_NODE})?.imgs;
            return images?.length > 0 && images[0].complete && images[0].naturalWidth === 512;
        }}""",
        timeout=20_000,
    )
    assert any(prompt_id in frame and '"progress"' in frame for frame in frames)
    views = [url for _, status, url in responses if "/view?" in url and status == 200]
    assert any("subfolder=web" in url for url in views), views

    browser_page.wait_for_selector('[data-testid="queue-overlay-toggle"]:has-text("0 active")')
    shot = tmp_path / "webui.png"
    browser_page.screenshot(path=str(shot))
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(exist_ok=True)
        shutil.copy(shot, DOCS / "webui.png")
    log = "\n".join(f"{m} {s} {u}" for m, s, u in responses)
    assert refused(responses, origin) == [], log
    assert unexplained(console) == [], log
    assert re.search(r"GET 200 .*/api/jobs\?", log), "the queue panel asks /api/jobs"
