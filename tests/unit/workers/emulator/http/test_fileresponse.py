"""A file served as aiohttp's FileResponse: validators, conditional requests, byte ranges."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.datastructures import Headers

from workers.emulator.http.fileresponse import (
    ETag,
    etag_of,
    file_response,
    last_modified,
    parse_date,
    parse_etags,
)

BODY = bytes(range(100))
MTIME_NS = 1_795_992_088_601_009_239  # 2026-11-29 22:41:28.601 UTC
SAME_SECOND = "Sun, 29 Nov 2026 22:41:29 GMT"  # what Last-Modified says (rounded up)
EARLIER = "Sun, 29 Nov 2026 22:41:28 GMT"


@pytest.fixture
def path(tmp_path: Path) -> str:
    file = tmp_path / "a.png"
    file.write_bytes(BODY)
    os.utime(file, ns=(MTIME_NS, MTIME_NS))
    return str(file)


@pytest.fixture
def etag(path: str) -> str:
    return f'"{etag_of(os.stat(path))}"'


def answer(path: str, **request: str) -> tuple[int, bytes, Headers]:
    headers = {"Content-Disposition": 'filename="a.png"', "Content-Type": "image/png"}
    response = file_response(path, Headers(request), headers)
    return response.status_code, bytes(response.body), Headers(raw=response.raw_headers)


def test_the_validators_are_aiohttps(path: str, etag: str) -> None:
    status, body, headers = answer(path)
    assert (status, body) == (200, BODY)
    assert etag == f'"{MTIME_NS:x}-64"'
    assert headers["etag"] == etag
    assert headers["last-modified"] == SAME_SECOND == last_modified(MTIME_NS / 1e9)
    assert (headers["accept-ranges"], headers["content-length"]) == ("bytes", "100")
    assert headers["content-type"] == "image/png"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("*", (ETag("*"),)),
        ('"a"', (ETag("a"),)),
        ('W/"a", "b"', (ETag("a", weak=True), ETag("b"))),
        ('"a", junk, "b"', (ETag("a"),)),
        ("junk", ()),
    ],
)
def test_etag_lists_are_parsed_as_aiohttp_does(
    header: str | None, expected: tuple[ETag, ...] | None
) -> None:
    assert parse_etags(header) == expected


def test_dates_read_any_zone_as_utc_and_ignore_garbage() -> None:
    assert parse_date(SAME_SECOND) == parse_date("Sun, 29 Nov 2026 22:41:29 +0200")
    assert parse_date("yesterday") is None
    assert parse_date(None) is None


@pytest.mark.parametrize(
    ("request_headers", "status"),
    [
        ({"if-none-match": "{etag}"}, 304),
        ({"if-none-match": "W/{etag}"}, 304),
        ({"if-none-match": '"x", {etag}'}, 304),
        ({"if-none-match": "*"}, 304),
        ({"if-none-match": '"other"'}, 200),
        ({"if-modified-since": SAME_SECOND}, 304),
        ({"if-modified-since": EARLIER}, 200),
        ({"if-none-match": '"other"', "if-modified-since": SAME_SECOND}, 200),
        ({"if-match": "{etag}"}, 200),
        ({"if-match": "W/{etag}"}, 412),
        ({"if-match": '"other"'}, 412),
        ({"if-unmodified-since": EARLIER}, 412),
        ({"if-unmodified-since": SAME_SECOND}, 200),
        ({"if-match": "{etag}", "if-unmodified-since": EARLIER}, 200),
    ],
)
def test_conditional_requests(
    path: str, etag: str, request_headers: dict[str, str], status: int
) -> None:
    request = {key: value.format(etag=etag) for key, value in request_headers.items()}
    got, body, headers = answer(path, **request)
    assert got == status
    if status == 304:
        assert body == b""
        assert (headers["etag"], headers["last-modified"]) == (etag, SAME_SECOND)
        assert headers["content-type"] == "image/png"
    if status == 412:
        assert (body, headers["content-length"]) == (b"", "0")
        assert "etag" not in headers


@pytest.mark.parametrize(
    ("header", "part", "content_range"),
    [
        ("bytes=0-9", BODY[:10], "bytes 0-9/100"),
        ("bytes=90-", BODY[90:], "bytes 90-99/100"),
        ("bytes=-10", BODY[90:], "bytes 90-99/100"),
        ("bytes=-1000", BODY, "bytes 0-99/100"),
        ("bytes=95-1000", BODY[95:], "bytes 95-99/100"),
        ("BYTES=1-1", BODY[1:2], "bytes 1-1/100"),
    ],
)
def test_one_byte_range_is_a_206(path: str, header: str, part: bytes, content_range: str) -> None:
    status, body, headers = answer(path, range=header)
    assert (status, body, headers["content-range"]) == (206, part, content_range)
    assert headers["content-length"] == str(len(part))


@pytest.mark.parametrize(
    "header", ["bytes=100-", "bytes=5-2", "bytes=0-1,4-5", "items=0-1", "bytes=-"]
)
def test_a_bad_or_unsatisfiable_range_is_a_416(path: str, header: str) -> None:
    status, body, headers = answer(path, range=header)
    assert (status, body, headers["content-range"]) == (416, b"", "bytes */100")


def test_if_range_older_than_the_file_sends_it_whole(path: str, etag: str) -> None:
    assert answer(path, range="bytes=0-9", **{"if-range": EARLIER})[0] == 200
    assert answer(path, range="bytes=0-9", **{"if-range": SAME_SECOND})[0] == 206
    assert answer(path, range="bytes=0-9", **{"if-range": etag})[0] == 206
