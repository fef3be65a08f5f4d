"""Session-wide real services: one redis-server per test session, on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gateway.redis_server import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> Iterator[str]:
    """A clean database on the session's server for each test."""
    client = redis.Redis(port=redis_server.port)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
