"""Fuzzing the JSON routes: whatever the body, no server error, and every prompt accepted
reaches a terminal state (a few dozen examples, so it stays fast in CI)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import CHECKPOINTS, txt2img

pytestmark = pytest.mark.timeout(90)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def prompt_bodies(draw: st.DrawFn) -> bytes:
    """A good prompt with a few inputs replaced, or junk, sometimes with raw tokens that
    Python reads but JSON has not (NaN, a lone surrogate)."""
    prompt: dict[str, Any] = txt2img(CHECKPOINTS[0], "fuzz", seed=draw(st.integers(0, 99)))
    for _ in range(draw(st.integers(0, 3))):
        node = draw(st.sampled_from(sorted(prompt)))
        name = draw(st.sampled_from([*sorted(prompt[node]["inputs"]), "extra"]))
        prompt[node]["inputs"][name] = draw(values)
    body: dict[str, Any] = {"prompt": draw(st.sampled_from([prompt, prompt, draw(values)]))}
    for key in draw(
        st.lists(
            st.sampled_from(
                [
                    "client_id",
                    "number",
                    "front",
                    "extra_data",
                    "partial_execution_targets",
                    "prompt_id",
                ]
            ),
            max_size=2,
        )
    ):
        body[key] = draw(values)
    text = json.dumps(body)
    raw = draw(st.sampled_from(["", "NaN", '"\\ud800"', "1e400"]))
    return (text.replace("7.0", raw, 1) if raw else text).encode()


OTHER_ROUTES = ("/queue", "/history", "/interrupt", "/free")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=prompt_bodies(), other=st.sampled_from(OTHER_ROUTES), junk=values)
async def test_no_json_body_gets_a_server_error_and_accepted_prompts_end(
    gateway: httpx.AsyncClient, body: bytes, other: str, junk: Any
) -> None:
    answer = await gateway.post("/prompt", content=body)
    assert answer.status_code < 500, (body[:300], answer.text[:300])
    for route_body in (json.dumps(junk).encode(), body):
        routed = await gateway.post(other, content=route_body)
        assert routed.status_code < 500, (other, route_body[:200], routed.text[:300])
    if answer.status_code == 200:
        await _until_terminal(gateway, answer.json()["prompt_id"])


async def _until_terminal(http: httpx.AsyncClient, prompt_id: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while (await http.get(f"/gateway/jobs/{prompt_id}")).json()["state"] not in (
        "success",
        "error",
        "interrupted",
        "cancelled",
        "quarantined",
    ):
        assert time.monotonic() < deadline, f"{prompt_id} never ended"
        await asyncio.sleep(0.05)
