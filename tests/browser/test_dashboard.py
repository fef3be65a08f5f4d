"""The dashboard at `/gateway/` in a real headless Chromium, over a real `comfy-gateway serve`
with two emulated workers: it loads without console errors, shows a tile per card and the job
that just finished, and needs the token like every route of a gateway that has one."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.browser.conftest import Console
from tests.faults.farms import AUTH, TOKEN, gateway_process, write_config
from tests.integration.conftest import CHECKPOINTS, txt2img

DOCS_SCREENSHOT = Path(__file__).parents[2] / "docs" / "dashboard.png"
"""Written with COMFY_GATEWAY_SCREENSHOTS=1 (the README's picture); else under the test's tmp."""


RENDER_A_LEDGER = """() => {
  const job = {prompt_id: "p-ledger", state: "success", worker: "w", group: "g",
    enqueued_at_ms: 1000, started_at_ms: 1600, finished_at_ms: 4000,
    ledger: {queue_s: 0.5, dispatch_s: 0.1, phases: {load: 1.0, encode: 0, sample: 1.4}}};
  render({now_ms: 5000, node: "n", workers: [], queue: [], finishes: [], recent: [job]});
  const spans = document.querySelectorAll('#recent tr[data-prompt="p-ledger"] .bar span');
  return [...spans].map((span) => span.title.split(" ")[0]);
}"""
"""A job whose history block carries the phase ledger, rendered by the page's own function:
its bars are the ledger's phases (those that took time), not queue and execution."""


def queue_job(url: str, checkpoint: str, seed: int, **size: int) -> str:
    body = {"prompt": txt2img(checkpoint, "dash", seed=seed, **size), "client_id": "dashboard"}
    answer = httpx.post(f"{url}/prompt", json=body, headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    prompt_id: str = answer.json()["prompt_id"]
    return prompt_id


def run_job(url: str, checkpoint: str, seed: int) -> str:
    """One prompt through the gateway, waited for until it is in history."""
    prompt_id = queue_job(url, checkpoint, seed)
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as poll:
        for _ in range(600):
            if prompt_id in poll.get(f"/history/{prompt_id}").json():
                return prompt_id
            poll.get("/readyz")  # paces the loop on a round trip, not on a sleep
    raise AssertionError(f"{prompt_id} never finished")


def test_the_dashboard_shows_the_cards_and_a_finished_job(
    page: tuple[object, Console], redis_url: str, tmp_path: Path
) -> None:
    browser_page, console = page
    config = write_config(tmp_path / "farm.toml", ["card0", "card1"])
    with gateway_process(config, redis_url, tmp_path / "node") as gateway:
        assert httpx.get(f"{gateway.url}/gateway/").status_code == 401
        assert httpx.get(f"{gateway.url}/gateway/dashboard.json").status_code == 401
        earlier = [run_job(gateway.url, ckpt, seed) for seed, ckpt in enumerate(CHECKPOINTS[1:])]
        prompt_id = run_job(gateway.url, CHECKPOINTS[0], seed=5)
        browser_page.goto(f"{gateway.url}/gateway/?token={TOKEN}")  # type: ignore[attr-defined]
        for name in ("card0", "card1"):
            browser_page.wait_for_selector(f'.card[data-worker="{name}"]')  # type: ignore[attr-defined]
        row = browser_page.wait_for_selector(f'#recent tr[data-prompt="{prompt_id}"]')  # type: ignore[attr-defined]
        assert "success" in row.text_content()
        browser_page.wait_for_selector("#live:not(.off)")  # type: ignore[attr-defined]
        queue_job(gateway.url, CHECKPOINTS[2], seed=9, steps=2000, size=512)  # runs on
        browser_page.wait_for_selector(".card .progress")  # type: ignore[attr-defined]
        tiles = browser_page.query_selector_all(".card")  # type: ignore[attr-defined]
        assert len(tiles) == 2
        shown = browser_page.query_selector_all("#recent tbody tr")  # type: ignore[attr-defined]
        assert [r.get_attribute("data-prompt") for r in shown] == [prompt_id, *reversed(earlier)]
        wanted = os.environ.get("COMFY_GATEWAY_SCREENSHOTS")
        shot = DOCS_SCREENSHOT if wanted else tmp_path / "dashboard.png"
        browser_page.screenshot(path=str(shot), full_page=True)  # type: ignore[attr-defined]
        assert shot.stat().st_size > 0
        bars = browser_page.evaluate(RENDER_A_LEDGER)  # type: ignore[attr-defined]
        assert bars == ["queue", "dispatch", "load", "sample"]
    assert console.errors == []
