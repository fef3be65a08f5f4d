"""A node that loses Redis stops claiming and says so in /readyz; it rejoins when Redis is
back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from gateway.redis_server import EmbeddedRedis
from tests.multihost.conftest import farm_nodes, node_process


def until_ready(
    url: str, ready: bool, problem: str = "", timeout_s: float = 15.0
) -> dict[str, Any]:
    """/readyz once it is (not) ready, with a problem naming `problem`."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = httpx.get(url + "/readyz", timeout=5)
        body: dict[str, Any] = answer.json()
        named = not problem or any(problem in text for text in body["problems"])
        if (answer.status_code == 200) is ready and named:
            return body
        assert time.monotonic() < deadline, f"/readyz never {ready, problem}: {body}"
        time.sleep(0.05)


def test_a_node_without_redis_is_not_ready_and_not_claiming_then_rejoins(
    tmp_path: Path,
) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        with node_process(redis.url, tmp_path, "wa") as node:
            redis.stop()
            down = until_ready(node.url, False, "not claiming jobs")
            assert any("redis unreachable" in problem for problem in down["problems"]), down
            assert farm_nodes(node.url)["node"]["standing"] is False
            redis.start()
            until_ready(node.url, True)
            assert farm_nodes(node.url)["node"]["standing"] is True
    finally:
        redis.stop()
