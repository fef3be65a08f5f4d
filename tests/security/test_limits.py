"""What one request may take: a `/prompt` body past `max_prompt_mib` is refused with 413
before it is read or stored; the embedded Redis has a `maxmemory` and never evicts a job;
a full Redis refuses new prompts with 503 while what it holds stays readable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import redis

from gateway.redis_server import EmbeddedRedis
from tests.integration.conftest import CHECKPOINTS, as_external, gateway_settings
from tests.integration.conftest import running_gateway as serve_gateway
from workers.supervision.launch import FarmLayout, WorkerHandle

pytestmark = pytest.mark.timeout(60)


def _prompt_body(pad_bytes: int) -> bytes:
    from tests.integration.conftest import txt2img

    extra = {"extra_pnginfo": {"pad": "x" * pad_bytes}}
    return json.dumps({"prompt": txt2img(CHECKPOINTS[0], "big"), "extra_data": extra}).encode()


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 65536):
        yield body[start : start + 65536]


async def test_a_50_mb_prompt_is_refused_with_413_and_not_stored(
    gateway: httpx.AsyncClient, redis_url: str
) -> None:
    answer = await gateway.post("/prompt", content=_prompt_body(50 * 1024 * 1024))
    assert answer.status_code == 413, answer.text[:300]
    error = answer.json()["error"]
    assert error["type"] == "payload_too_large"
    assert "max_prompt_mib" in error["message"] and str(10 * 1024 * 1024) in error["message"]
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.info("memory")["used_memory"] < 20 * 1024 * 1024
    finally:
        client.close()


async def test_a_chunked_prompt_past_the_limit_is_refused_too(
    redis_url: str,
    tmp_path: Path,
    security_workers: list[WorkerHandle],
    security_layout: FarmLayout,
) -> None:
    settings = gateway_settings(redis_url, tmp_path, max_prompt_mib=0.05)
    async with (
        serve_gateway(settings, as_external(security_workers), security_layout.input_dir) as url,
        httpx.AsyncClient(base_url=url, timeout=15) as http,
    ):
        small = await http.post("/prompt", content=_chunks(_prompt_body(10_000)))
        assert small.status_code == 200, small.text
        large = await http.post("/prompt", content=_chunks(_prompt_body(100_000)))
        assert large.status_code == 413, large.text
        assert "max_prompt_mib" in large.json()["error"]["message"]


def test_the_embedded_redis_is_capped_and_never_evicts(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis", maxmemory_mib=64) as server:
        client = redis.Redis(port=server.port)
        try:
            assert client.config_get("maxmemory")["maxmemory"] == str(64 * 1024 * 1024)
            assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
        finally:
            client.close()


async def test_a_full_redis_refuses_new_prompts_with_503_and_keeps_serving_reads(
    gateway: httpx.AsyncClient, redis_url: str
) -> None:
    from tests.integration.conftest import txt2img

    client = redis.Redis.from_url(redis_url)
    before = client.config_get("maxmemory")["maxmemory"]
    assert before is not None
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    try:
        answer = await gateway.post("/prompt", json={"prompt": txt2img(CHECKPOINTS[0], "full")})
        assert answer.status_code == 503, answer.text[:300]
        assert answer.headers["retry-after"]
        assert answer.json()["error"]["type"] == "store_full"
        assert (await gateway.get("/queue")).status_code == 200
    finally:
        client.config_set("maxmemory", before)
        client.close()
    again = await gateway.post("/prompt", json={"prompt": txt2img(CHECKPOINTS[0], "room")})
    assert again.status_code == 200, again.text
