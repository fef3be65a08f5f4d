"""The log kept for /internal/logs: the last lines, each with its local ISO time."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from workers.emulator.http.logring import LogRing

START = datetime(2026, 1, 2, 3, 4, 5, 600000)


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("x", logging.INFO, __file__, 1, message, args, None)


def test_the_ring_keeps_the_last_lines_with_their_times() -> None:
    ticks = iter(START + timedelta(seconds=n) for n in range(10))
    ring = LogRing(capacity=2, now=lambda: next(ticks))
    for each in (record("one"), record("two %s", 2), record("three")):
        ring.handle(each)
    assert list(ring.entries) == [
        {"t": "2026-01-02T03:04:06.600000", "m": "two 2\n"},
        {"t": "2026-01-02T03:04:07.600000", "m": "three\n"},
    ]
    assert ring.text() == "2026-01-02T03:04:06.600000 - two 2\n2026-01-02T03:04:07.600000 - three\n"


def test_records_reach_the_ring_through_a_logger() -> None:
    ring = LogRing(now=lambda: START)
    logger = logging.getLogger("tests.logring")
    logger.addHandler(ring)
    try:
        logger.warning("got prompt")
    finally:
        logger.removeHandler(ring)
    assert ring.text() == "2026-01-02T03:04:05.600000 - got prompt\n"
