"""A file served as aiohttp's FileResponse serves it (ComfyUI's `/view` of a file kept as is).

ETag `"<mtime in ns, hex>-<size, hex>"`, Last-Modified rounded up to the next second; the
conditional headers in RFC 9110 order (If-Match and If-Unmodified-Since -> 412, If-None-Match
and If-Modified-Since -> 304); one byte range (206), a malformed or unsatisfiable one -> 416
(aiohttp takes no multi-range). The caller's headers (Content-Disposition, Content-Type) go on
every answer, as ComfyUI passes them to the FileResponse.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import formatdate, parsedate

from starlette.datastructures import Headers
from starlette.responses import Response

ETAG_ANY = "*"
_ETAG_LIST = re.compile(r'((W/)?"([!\x23-\x7E\x80-\xff]+)")(?:\s*,\s*|$)|(.)')
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$", re.ASCII | re.IGNORECASE)


class RangeNotSatisfiable(Exception):
    """The Range header is malformed or starts past the end of the file."""


@dataclass(frozen=True)
class ETag:
    value: str
    weak: bool = False


def etag_of(stat: os.stat_result) -> str:
    """The ETag value (unquoted) aiohttp derives from a file's stat."""
    return f"{stat.st_mtime_ns:x}-{stat.st_size:x}"


def last_modified(mtime: float) -> str:
    """aiohttp rounds the modification time up to the next whole second."""
    return formatdate(math.ceil(mtime), usegmt=True)


def parse_etags(header: str | None) -> tuple[ETag, ...] | None:
    """aiohttp's If-Match / If-None-Match parsing: None when absent or empty; the list stops
    at the first malformed entry."""
    if not header:
        return None
    if header == ETAG_ANY:
        return (ETag(ETAG_ANY),)
    found: list[ETag] = []
    for match in _ETAG_LIST.finditer(header):
        weak, value, garbage = match.group(2, 3, 4)
        if garbage:
            break
        found.append(ETag(value, weak=bool(weak)))
    return tuple(found)


def etag_matches(etag: str, tags: tuple[ETag, ...], *, weak: bool) -> bool:
    if len(tags) == 1 and tags[0].value == ETAG_ANY:
        return True
    return any(tag.value == etag for tag in tags if weak or not tag.weak)


def parse_date(header: str | None) -> float | None:
    """aiohttp's reading of an HTTP date: a POSIX timestamp, any zone taken as UTC; None when
    absent or unreadable."""
    parsed = parsedate(header) if header is not None else None
    if parsed is None:
        return None
    try:
        return datetime(*parsed[:6], tzinfo=UTC).timestamp()
    except ValueError:
        return None


def precondition_failed(request: Headers, stat: os.stat_result) -> bool:
    if_match = parse_etags(request.get("if-match"))
    if if_match is not None:
        return not etag_matches(etag_of(stat), if_match, weak=False)
    since = parse_date(request.get("if-unmodified-since"))
    return since is not None and stat.st_mtime > since


def not_modified(request: Headers, stat: os.stat_result) -> bool:
    if_none_match = parse_etags(request.get("if-none-match"))
    if if_none_match is not None:
        return etag_matches(etag_of(stat), if_none_match, weak=True)
    since = parse_date(request.get("if-modified-since"))
    return since is not None and stat.st_mtime <= since


def _parse_range(header: str) -> tuple[int | None, int | None]:
    """aiohttp's `request.http_range` as (start, stop): a suffix range has a negative start."""
    found = _RANGE.match(header)
    if found is None:
        raise RangeNotSatisfiable(header)
    start = int(found[1]) if found[1] else None
    end = int(found[2]) if found[2] else None
    if start is None and end is None:
        raise RangeNotSatisfiable(header)
    if start is None:
        return -(end or 0), None
    if end is not None and start >= end + 1:
        raise RangeNotSatisfiable(header)
    return start, None if end is None else end + 1


def byte_range(request: Headers, stat: os.stat_result) -> tuple[int, int] | None:
    """(offset, count) of the part to send, None for the whole file (no Range, or an If-Range
    date older than the file). Raises RangeNotSatisfiable."""
    header = request.get("range")
    if_range = parse_date(request.get("if-range"))
    if header is None or (if_range is not None and stat.st_mtime > if_range):
        return None
    start, stop = _parse_range(header)
    size = stat.st_size
    if start is not None and start < 0 and stop is None:
        offset = max(start + size, 0)
        return offset, size - offset
    offset = start or 0
    if offset >= size:
        raise RangeNotSatisfiable(header)
    return offset, min(size if stop is None else stop, size) - offset


def _read(path: str, offset: int, count: int) -> bytes:
    with open(path, "rb") as file:
        file.seek(offset)
        return file.read(count)


def file_response(path: str, request: Headers, headers: Mapping[str, str]) -> Response:
    """The answer to a GET of `path` with the request's conditional and Range headers."""
    stat = os.stat(path)
    if precondition_failed(request, stat):
        return Response(b"", status_code=412, headers=headers)
    validators = {"ETag": f'"{etag_of(stat)}"', "Last-Modified": last_modified(stat.st_mtime)}
    if not_modified(request, stat):
        return Response(status_code=304, headers={**headers, **validators})
    size = stat.st_size
    try:
        part = byte_range(request, stat)
    except RangeNotSatisfiable:
        return Response(
            b"", status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"}
        )
    sent = {**headers, **validators, "Accept-Ranges": "bytes"}
    if part is None:
        return Response(_read(path, 0, size), headers=sent)
    offset, count = part
    sent["Content-Range"] = f"bytes {offset}-{offset + count - 1}/{size}"
    return Response(_read(path, offset, count), status_code=206, headers=sent)
