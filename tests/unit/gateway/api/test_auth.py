"""The token guard's parsing: where a token is found, and that it is removed before the
request goes on (no route and no worker sees it)."""

from __future__ import annotations

import pytest

from gateway.api.auth import bearer, matches, split_cookies, split_query


@pytest.mark.parametrize(
    ("query", "sent", "kept"),
    [
        (b"", None, b""),
        (b"clientId=a", None, b"clientId=a"),
        (b"token=t", "t", b""),
        (b"clientId=a&token=t", "t", b"clientId=a"),
        (b"token=t&filename=x.png&type=output", "t", b"filename=x.png&type=output"),
        (b"token=a%2Bb", "a+b", b""),
    ],
)
def test_the_token_query_parameter_is_found_and_removed(
    query: bytes, sent: str | None, kept: bytes
) -> None:
    assert split_query(query) == (sent, kept)


@pytest.mark.parametrize(
    ("cookie", "sent", "kept"),
    [
        ("a=1", None, "a=1"),
        ("comfy_gateway_token=t", "t", None),
        ("a=1; comfy_gateway_token=t; b=2", "t", "a=1; b=2"),
        ('comfy_gateway_token="t"', "t", None),
    ],
)
def test_the_token_cookie_is_found_and_removed(
    cookie: str, sent: str | None, kept: str | None
) -> None:
    headers = [(b"host", b"h"), (b"cookie", cookie.encode())]
    found, rest = split_cookies(headers)
    assert found == sent
    assert rest == [(b"host", b"h")] + ([(b"cookie", kept.encode())] if kept else [])


@pytest.mark.parametrize(
    ("value", "sent"),
    [(b"Bearer t", "t"), (b"bearer  t ", "t"), (b"Basic dDp0", None), (b"t", None)],
)
def test_a_bearer_header_is_read(value: bytes, sent: str | None) -> None:
    assert bearer([(b"authorization", value)]) == sent


def test_a_missing_or_other_token_does_not_match() -> None:
    assert matches("t", "t")
    assert not matches(None, "t")
    assert not matches("", "t")
    assert not matches("tt", "t")
