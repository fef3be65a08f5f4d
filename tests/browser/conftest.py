"""A real headless Chromium, driven by Playwright, for the pages the gateway serves.

Debian's `chromium` is used (`CHROMIUM` names another binary); `make test` installs it where it
can. Without a browser these tests skip, saying why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium")


@dataclass
class Console:
    """What the page said on its console, and the errors it raised."""

    errors: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One Chromium per test module. Not per session: while Playwright's sync API is open it
    runs an event loop in the main thread, and every async test after it would fail
    ("Runner.run() cannot be called from a running event loop")."""
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[tuple[object, Console]]:
    """A fresh page and what its console reports (errors and uncaught exceptions)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    console = Console()

    def on_console(message: object) -> None:
        text = f"{message.type}: {message.text}"  # type: ignore[attr-defined]
        console.messages.append(text)
        if message.type == "error":  # type: ignore[attr-defined]
            console.errors.append(text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: console.errors.append(f"pageerror: {error}"))
    yield page, console
    context.close()
