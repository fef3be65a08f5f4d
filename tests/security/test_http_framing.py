"""Request framing a front proxy may read differently is refused (400): a folded header line,
or both Content-Length and Transfer-Encoding; a client that dribbles its request head, or
sends nothing, is dropped after `header_timeout_s`. Raw sockets on the served gateway."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.conftest import as_external, gateway_settings
from tests.security.served import served_gateway
from workers.supervision.launch import FarmLayout, WorkerHandle

pytestmark = pytest.mark.timeout(30)

HEADER_TIMEOUT_S = 1.0


@pytest.fixture
async def port(
    redis_url: str,
    tmp_path: Path,
    security_workers: list[WorkerHandle],
    security_layout: FarmLayout,
) -> AsyncIterator[int]:
    settings = gateway_settings(
        redis_url, tmp_path, header_timeout_s=HEADER_TIMEOUT_S, keep_alive_timeout_s=1.0
    )
    async with served_gateway(settings, as_external(security_workers), security_layout) as (
        _,
        served_port,
    ):
        yield served_port


async def _exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), timeout=5)
    finally:
        writer.close()


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


async def test_a_plain_request_is_still_answered(port: int) -> None:
    answer = await _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
    assert _status(answer) == 200, answer[:200]


async def test_a_transfer_encoding_folded_over_two_lines_is_refused(port: int) -> None:
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"
    )
    answer = await _exchange(port, request)
    assert _status(answer) == 400, answer[:200]
    assert b"folding" in answer


async def test_a_folded_line_of_any_header_is_refused(port: int) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Note: one\r\n\ttwo\r\n\r\n"
    assert _status(await _exchange(port, request)) == 400


async def test_content_length_with_transfer_encoding_is_refused(port: int) -> None:
    request = (
        b"GET /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    answer = await _exchange(port, request)
    assert _status(answer) == 400, answer[:200]
    assert b"Content-Length and Transfer-Encoding" in answer


async def _dribble(writer: asyncio.StreamWriter) -> None:
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n")
    for index in range(40):
        await asyncio.sleep(0.2)
        writer.write(b"X-Slow-%d: x\r\n" % index)


async def test_a_client_dribbling_its_headers_is_dropped_after_the_header_timeout(
    port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    dribbler = asyncio.create_task(_dribble(writer))
    started_s = time.monotonic()
    try:
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        assert time.monotonic() - started_s < HEADER_TIMEOUT_S + 1.5
    finally:
        dribbler.cancel()
        writer.close()


async def test_a_connection_that_sends_nothing_is_dropped(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
    finally:
        writer.close()
