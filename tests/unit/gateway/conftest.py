"""Fixtures for the gateway's unit tests: a JobStore on the session's real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from gateway.jobs.keys import Keys
from gateway.jobs.store import JobStore, StoreLimits


class FakeClock:
    """Wall-clock seconds that only move when told."""

    def __init__(self, now_s: float = 1_800_000_000.0):
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
def store(redis_client: aioredis.Redis, clock: FakeClock) -> JobStore:
    limits = StoreLimits(max_failures=2, history_max_items=5, lease_s=10.0)
    return JobStore(redis_client, Keys("t"), limits, clock=clock)
