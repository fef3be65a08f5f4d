"""The gateway's HTTP/1.1 protocol: uvicorn's h11 one, stricter where a front proxy may differ.

h11 unfolds an obsolete folded header line (`Transfer-Encoding:\\r\\n chunked`) and lets
`Transfer-Encoding` win over `Content-Length`; a proxy in front that reads the two the other
way sees a different request boundary (request smuggling). So a request head with a folded
line, or with both headers, is refused with 400 and the connection closed before h11 parses it.

uvicorn arms no timer while a request head arrives, so a client that dribbles its headers
holds a connection forever; here a head must be complete within `header_timeout_s` of its
first byte (of the connection, or after the previous response), else the connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

END_OF_HEAD = b"\r\n\r\n"


def head_problem(head: bytes) -> str | None:
    """Why a raw request head (request line and header lines) is refused, or None."""
    lines = head.split(b"\r\n")[1:]
    if any(line[:1] in (b" ", b"\t") for line in lines):
        return "obsolete line folding in a header"
    names = {line.partition(b":")[0].strip().lower() for line in lines}
    if b"content-length" in names and b"transfer-encoding" in names:
        return "both Content-Length and Transfer-Encoding"
    return None


class StrictH11Protocol(H11Protocol):
    """H11Protocol with a request-head check and a deadline on receiving each head."""

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head = bytearray()
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is not h11.IDLE:
            super().data_received(data)
            return
        self._arm_head_deadline()
        self._head += data
        end = self._head.find(END_OF_HEAD)
        if end < 0:
            super().data_received(data)
            return
        problem = head_problem(bytes(self._head[:end]))
        self._head.clear()
        self._disarm_head_deadline()
        if problem is not None:
            log.warning("refused a request head from %s: %s", self.client, problem)
            self.send_400_response(f"Invalid HTTP request: {problem}.")
            return
        super().data_received(data)

    def _arm_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_late)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closed a connection from %s: no request head in time", self.client)
            self.transport.close()


def strict_protocol(header_timeout_s: float) -> type[StrictH11Protocol]:
    """The protocol class for `uvicorn.Config(http=...)` with this head deadline."""
    return type("GatewayH11Protocol", (StrictH11Protocol,), {"header_timeout_s": header_timeout_s})


def uvicorn_options(
    header_timeout_s: float, keep_alive_timeout_s: float, max_header_kib: int
) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments for the gateway's strict HTTP handling."""
    return {
        "http": strict_protocol(header_timeout_s),
        "timeout_keep_alive": keep_alive_timeout_s,
        "h11_max_incomplete_event_size": max_header_kib * 1024,
    }
