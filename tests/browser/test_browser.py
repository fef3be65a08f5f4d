"""The browser fixture itself works: a page served on loopback renders and reports errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.browser.conftest import Console

PAGE = b"<html><body><p id=t>ready</p><script>console.error('boom')</script></body></html>"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_page_renders_and_its_console_errors_are_collected(
    page: tuple[object, Console], site: str
) -> None:
    browser_page, console = page
    browser_page.goto(site)  # type: ignore[attr-defined]
    assert browser_page.text_content("#t") == "ready"  # type: ignore[attr-defined]
    assert console.errors == ["error: boom"]
