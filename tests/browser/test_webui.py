"""The ComfyUI web frontend through the gateway, in a real headless Chromium: a farm of two
emulated workers behind `comfy-gateway serve`, the editor at `/`, a workflow queued with its
Run button, its progress in the tab title and its image on the SaveImage node; and what a
newcomer meets first, the template browser, its first template (the frontend's own default
graph, Z-Image Turbo) picked and run.

`UPDATE_SCREENSHOTS=1` also writes the screenshot to docs/webui.png (the README's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import redis

from gateway.redis_server import EmbeddedRedis
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
)
FRONTEND_ONLY_ERRORS = (
    # The frontend looks for releases and news on api.comfy.org; this machine has no Internet.
    "net::ERR_NAME_NOT_RESOLVED",
    "net::ERR_INTERNET_DISCONNECTED",
)
RESOURCE_ERROR = "Failed to load resource: the server responded with a status of"
"""Each such console line is a response the request log checks by its URL."""

SAVE_NODE = 9
LOADED_AND_DEFAULT = """async graph => {
    const nodes = () => window.app.graph.serialize().nodes
        .map(n => [n.id, n.type, n.widgets_values]).sort((a, b) => a[0] - b[0]);
    await window.app.loadGraphData(graph);
    const loaded = nodes();
    await window.app.loadGraphData();  // no graph: the frontend's default one
    return [loaded, nodes()];
}"""
"""A workflow's nodes as the editor loads them, and the default graph's."""
PAGE_LOAD_MS = 90_000
"""The editor is some 30 MB of scripts: it took 20-40 s to load on two cores shared with a
load average of 10."""


def classic_txt2img(checkpoint: str) -> dict[str, Any]:
    """SD1.5 text to image in the editor's format, on the farm's own checkpoints, with steps
    enough that its progress shows."""

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


@pytest.fixture(scope="module")
def farm(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """One farm for the module's tests (each has a fresh browser context): starting it and
    loading the editor's scripts is most of a test's time."""
    pytest.importorskip("comfyui_frontend_package")
    tmp_path = tmp_path_factory.mktemp("webui")
    config = tmp_path / "farm.toml"
    checkpoints = json.dumps(list(CHECKPOINTS))
    workers = "".join(
        f'[[workers]]\nname = "web{i}"\nemulate = "rtx4070ti"\ncheckpoints = {checkpoints}\n'
        for i in range(2)
    )
    config.write_text(f"time_scale = {TIME_SCALE}\nwarmup_probe_steps = 0\n{workers}")
    redis.Redis(port=redis_server.port).flushall()
    with gateway_process(
        config, redis_server.url, tmp_path / "node", ready_timeout_s=90
    ) as gateway:
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


@dataclass
class Traffic:
    """What the page exchanged with the gateway: responses and WebSocket frames."""

    origin: str
    responses: list[tuple[str, int, str]] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "\n".join(f"{m} {s} {u}" for m, s, u in self.responses)


def load_editor(browser_page: Any, farm: GatewayProcess) -> Traffic:
    """The editor at the gateway's `/`, loaded, as it opens."""
    traffic = Traffic(f"{urlsplit(farm.url).scheme}://{urlsplit(farm.url).netloc}")
    browser_page.on(
        "response", lambda r: traffic.responses.append((r.request.method, r.status, r.url))
    )
    browser_page.on(
        "websocket",
        lambda socket: socket.on("framereceived", lambda f: traffic.frames.append(str(f))),
    )
    browser_page.goto(farm.url + "/")
    browser_page.wait_for_selector('[data-testid="queue-button"]', timeout=PAGE_LOAD_MS)
    browser_page.wait_for_function("() => window.app?.graph && window.app.api?.clientId")
    return traffic


def open_editor(browser_page: Any, farm: GatewayProcess) -> Traffic:
    """The editor loaded, the new user's template offer dismissed."""
    traffic = load_editor(browser_page, farm)
    browser_page.keyboard.press("Escape")
    return traffic


def run_from_the_button(browser_page: Any) -> str:
    """Press Run; the prompt id the gateway answered."""
    with browser_page.expect_response(
        lambda r: urlsplit(r.url).path == "/api/prompt" and r.request.method == "POST"
    ) as queued:
        browser_page.click('[data-testid="queue-button"]')
    assert queued.value.status == 200, queued.value.text()
    prompt_id: str = queued.value.json()["prompt_id"]
    return prompt_id


def wait_for_saved_image(browser_page: Any, width_px: int) -> None:
    """SaveImage shows the output, fetched through the gateway's /view."""
    browser_page.wait_for_function(
        f"""() => {{
            const images = window.app.graph.getNodeById({SAVE_NODE})?.imgs;
            return images?.length > 0 && images[0].complete
                && images[0].naturalWidth === {width_px};
        }}""",
        timeout=30_000,
    )


def check_clean(traffic: Traffic, console: Console) -> None:
    """No refusal and no console error that nothing explains."""
    assert refused(traffic.responses, traffic.origin) == [], traffic.log()
    assert unexplained(console) == [], traffic.log()


@pytest.mark.timeout(240)
def test_the_editor_queues_a_workflow_to_the_farm_and_shows_its_image(
    farm: GatewayProcess, page: tuple[Any, Console], tmp_path: Path
) -> None:
    browser_page, console = page
    traffic = open_editor(browser_page, farm)
    browser_page.evaluate(
        "graph => window.app.loadGraphData(graph)", classic_txt2img(CHECKPOINTS[0])
    )
    prompt_id = run_from_the_button(browser_page)

    # Progress: the tab title shows the run's percentage while it executes.
    browser_page.wait_for_function(r"() => /\[[1-9]\d*%\]/.test(document.title)", timeout=20_000)
    wait_for_saved_image(browser_page, 512)
    assert any(prompt_id in frame and '"progress"' in frame for frame in traffic.frames)
    views = [url for _, status, url in traffic.responses if "/view?" in url and status == 200]
    assert any("subfolder=web" in url for url in views), views

    browser_page.wait_for_selector('[data-testid="queue-overlay-toggle"]:has-text("0 active")')
    shot = tmp_path / "webui.png"
    browser_page.screenshot(path=str(shot))
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(exist_ok=True)
        shutil.copy(shot, DOCS / "webui.png")
    check_clean(traffic, console)
    assert re.search(r"GET 200 .*/api/jobs\?", traffic.log()), "the queue panel asks /api/jobs"


@pytest.mark.timeout(240)
def test_a_newcomer_runs_the_first_template_offered_and_sees_its_image(
    farm: GatewayProcess, page: tuple[Any, Console]
) -> None:
    """Nothing injected, a user's very first visit: frontend 1.58 opens a blank graph under
    its template browser. The emulated workers offer templates as a ComfyUI with its template
    package does, the first the frontend's own default graph (Z-Image Turbo: UNETLoader,
    CLIPLoader, VAELoader, ...), whose files they have: one click on it, then Run."""
    browser_page, console = page
    shutil.rmtree(farm.data_dir / "user", ignore_errors=True)  # the farm keeps user settings
    traffic = load_editor(browser_page, farm)
    assert browser_page.evaluate("() => window.app.graph._nodes.length") == 0
    first = browser_page.locator('[data-testid^="template-workflow-"]').first
    assert first.get_attribute("data-testid") == "template-workflow-image_z_image_turbo"
    browser_page.wait_for_function(  # its thumbnail, served by a worker through the gateway
        """() => [...document.querySelectorAll('[data-testid^="template-workflow-"] img')]
            .some(img => img.complete && img.naturalWidth > 0)"""
    )
    first.click()
    loaders = "() => [62, 63, 66].map(id => window.app.graph.getNodeById(id)?.type).join()"
    browser_page.wait_for_function(f"{loaders} === 'CLIPLoader,VAELoader,UNETLoader'")
    # SaveImage lies right of the first screen, and a node off screen draws no image: the
    # fit-view button's command brings the whole graph in.
    browser_page.evaluate(
        "() => window.app.extensionManager.command.execute('Comfy.Canvas.FitView')"
    )
    prompt_id = run_from_the_button(browser_page)

    wait_for_saved_image(browser_page, 1024)
    assert any(prompt_id in frame and '"progress"' in frame for frame in traffic.frames)
    history = httpx.get(f"{farm.url}/history/{prompt_id}", timeout=10).json()[prompt_id]
    assert history["status"]["status_str"] == "success"
    assert history["prompt"][2]["66"]["inputs"]["unet_name"] == "z_image_turbo_bf16.safetensors"
    # The template stays the default graph of the frontend pinned, node for node.
    template = httpx.get(f"{farm.url}/templates/image_z_image_turbo.json", timeout=10).json()
    loaded, default = browser_page.evaluate(LOADED_AND_DEFAULT, template)
    assert loaded == default
    assert len(loaded) == len(template["nodes"])
    check_clean(traffic, console)
