"""Bad input never costs a server error or a worker slot: each body below gets a clear 4xx in
ComfyUI's error shape, and the farm still runs the next good prompt."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(60)

MARK = 12345.5
"""A cfg value in the good prompt that the cases replace with raw JSON text."""


def _with_cfg(raw: str) -> bytes:
    prompt = txt2img(CHECKPOINTS[0], "bad")
    prompt["3"]["inputs"]["cfg"] = MARK
    return json.dumps({"prompt": prompt}).replace(str(MARK), raw).encode()


def _with_text(raw: str) -> bytes:
    prompt = txt2img(CHECKPOINTS[0], "bad")
    prompt["6"]["inputs"]["text"] = "MARK"
    return json.dumps({"prompt": prompt}).replace('"MARK"', raw).encode()


def _with_client_id(raw: str) -> bytes:
    body = json.dumps({"prompt": txt2img(CHECKPOINTS[0], "bad"), "client_id": "MARK"})
    return body.replace('"MARK"', raw).encode()


DEEP = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
UNFORWARDABLE = {
    "NaN": _with_cfg("NaN"),
    "Infinity": _with_cfg("Infinity"),
    "-Infinity": _with_cfg("-Infinity"),
    "1e400": _with_cfg("1e400"),
    "a lone surrogate in a text input": _with_text('"\\ud800"'),
    "a lone surrogate in client_id": _with_client_id('"\\udfff"'),
    "raw surrogate bytes": _with_text('"MARK"').replace(b'"MARK"', b'"\xed\xa0\x80"'),
    "nested 100,000 deep": DEEP,
    "nested 101 deep": b'{"prompt": ' + b"[" * 101 + b"]" * 101 + b"}",
}


def _comfy_error(answer: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = answer.json()
    assert set(body) == {"error", "node_errors"}, body
    assert set(body["error"]) == {"type", "message", "details", "extra_info"}, body
    return body


async def _post(http: httpx.AsyncClient, body: bytes) -> httpx.Response:
    return await http.post("/prompt", content=body, headers={"content-type": "application/json"})


async def _until_done(http: httpx.AsyncClient, prompt_id: str, timeout_s: float = 10) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        state: str = (await http.get(f"/gateway/jobs/{prompt_id}")).json()["state"]
        if state in ("success", "error", "interrupted", "cancelled", "quarantined"):
            return state
        assert time.monotonic() < deadline, f"{prompt_id} still {state} after {timeout_s}s"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("case", list(UNFORWARDABLE))
async def test_a_prompt_that_could_not_be_forwarded_is_refused_with_a_comfyui_400(
    gateway: httpx.AsyncClient, case: str
) -> None:
    answer = await _post(gateway, UNFORWARDABLE[case])
    assert answer.status_code == 400, answer.text[:300]
    error = _comfy_error(answer)["error"]
    assert error["type"] == "invalid_json"
    assert error["message"].startswith("body is"), error


@pytest.mark.parametrize("value", ['"nan"', '"inf"', '"-Infinity"'])
async def test_a_float_input_that_converts_to_no_finite_number_fails_validation(
    gateway: httpx.AsyncClient, value: str
) -> None:
    answer = await _post(gateway, _with_cfg(value))
    assert answer.status_code == 400, answer.text[:300]
    body = _comfy_error(answer)
    assert body["error"]["type"] == "prompt_outputs_failed_validation"
    (error,) = body["node_errors"]["3"]["errors"]
    assert error["type"] == "invalid_input_type"
    assert error["extra_info"]["input_name"] == "cfg"


async def test_four_unforwardable_prompts_leave_the_farm_serving(
    gateway: httpx.AsyncClient,
) -> None:
    for case in ("NaN", "a lone surrogate in a text input", "NaN", "1e400"):
        assert (await _post(gateway, UNFORWARDABLE[case])).status_code == 400
    good = await gateway.post("/prompt", json={"prompt": txt2img(CHECKPOINTS[0], "good")})
    assert good.status_code == 200, good.text
    assert await _until_done(gateway, good.json()["prompt_id"]) == "success"


async def test_the_other_json_routes_refuse_the_same_bodies_with_a_400(
    gateway: httpx.AsyncClient,
) -> None:
    for path in ("/queue", "/history", "/api/queue", "/free"):
        for case in ("NaN", "a lone surrogate in client_id", "nested 100,000 deep"):
            answer = await gateway.post(path, content=UNFORWARDABLE[case])
            assert answer.status_code == 400, (path, case, answer.text[:300])
            assert _comfy_error(answer)["error"]["type"] == "invalid_json"


async def test_interrupt_and_queue_ids_with_a_surrogate_are_refused_not_a_server_error(
    gateway: httpx.AsyncClient,
) -> None:
    for path, body in [
        ("/interrupt", b'{"prompt_id": "\\ud800"}'),
        ("/queue", b'{"delete": ["\\ud800"]}'),
        ("/history", b'{"delete": ["\\ud800"]}'),
    ]:
        answer = await gateway.post(path, content=body)
        assert answer.status_code < 500, (path, answer.status_code, answer.text[:200])


async def test_a_100_kb_query_string_on_an_unknown_route_is_414(
    gateway: httpx.AsyncClient,
) -> None:
    port = gateway.base_url.port
    assert port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    target = "/no/such/route?" + "a" * 100_000
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 414 Request-URI Too Long", head[:200]
    error = json.loads(body)["error"]
    assert error["type"] == "uri_too_long"
    assert "8190" in error["message"]


@pytest.mark.parametrize("query", ["max_items=" + "9" * 30, "offset=-" + "9" * 30 + "&max_items=2"])
async def test_history_takes_huge_integers(gateway: httpx.AsyncClient, query: str) -> None:
    answer = await gateway.get(f"/history?{query}")
    assert answer.status_code == 200, answer.text[:300]


@pytest.mark.parametrize("path", ["/models/%15%12%C3%87", "/api/models/a%00b", "/no-such/%1Fx"])
async def test_control_characters_in_a_path_are_no_server_error(
    gateway: httpx.AsyncClient, path: str
) -> None:
    """Found by fuzzing the OpenAPI description: such a path, decoded, is no valid URL to
    send on to a worker."""
    answer = await gateway.get(path)
    assert answer.status_code == 404, answer.text
