"""The cross-origin guard ComfyUI applies to a server on loopback."""

from __future__ import annotations

import pytest

from gateway.api.origin import cross_origin


@pytest.mark.parametrize(
    ("host", "origin", "refused"),
    [
        ("127.0.0.1:8188", "http://127.0.0.1:8188", False),
        ("127.0.0.1:8188", "http://127.0.0.1:1", True),
        ("127.0.0.1:8188", "https://evil.example", True),
        ("localhost:8188", "http://localhost:8188", False),
        ("[::1]:8188", "http://[::1]:8188", False),
        ("127.0.0.1", "http://127.0.0.1:1", True),
        ("127.0.0.1:8188", "http://127.0.0.1", False),  # no port on one side: hosts compared
        ("10.1.2.3:8188", "https://elsewhere.example", False),  # not loopback: not guarded
        ("127.0.0.1:8188", None, False),
        (None, "http://127.0.0.1:1", False),
    ],
)
def test_a_foreign_origin_is_refused_only_on_a_loopback_host(
    host: str | None, origin: str | None, refused: bool
) -> None:
    assert cross_origin(host, origin) is refused
