"""Parsing POST /prompt bodies: every fault a 400 with a clear type."""

from __future__ import annotations

import json

import pytest

from gateway.api.schemas import PromptRequest, parse_prompt_request
from gateway.errors import BadRequest


def parse(body: object) -> PromptRequest:
    return parse_prompt_request(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"{nope", "invalid_json"),
        ([1, 2], "invalid_prompt"),
        ({"client_id": "x"}, "no_prompt"),
        ({"prompt": {}, "prompt_id": ""}, "invalid_prompt_id"),
        ({"prompt": {}, "prompt_id": "x" * 257}, "invalid_prompt_id"),
        ({"prompt": {}, "extra_data": []}, "invalid_prompt"),
        ({"prompt": {}, "extra_data": {"gateway": {"priority": "high"}}}, "invalid_prompt"),
        ({"prompt": {}, "extra_data": {"gateway": {"priority": 10**6}}}, "invalid_prompt"),
        ({"prompt": {}, "number": "first"}, "invalid_prompt"),
    ],
)
def test_faults_are_named(body: object, kind: str) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(BadRequest) as caught:
        parse_prompt_request(raw)
    assert caught.value.kind == kind


def test_client_id_lands_in_extra_data_and_hints_are_read() -> None:
    request = parse(
        {
            "prompt": {"1": {}},
            "client_id": "c9",
            "front": True,
            "extra_data": {"gateway": {"priority": 5, "group": "fp16vae"}},
        }
    )
    assert request.extra_data["client_id"] == "c9"
    assert (request.priority, request.group, request.front) == (5, "fp16vae", True)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("not-a-uuid-123", "not-a-uuid-123"),
        ("0B0E7A9E-3F7D-4C2F-9A1F-0A4D4B1F6C11", "0B0E7A9E-3F7D-4C2F-9A1F-0A4D4B1F6C11"),
        (42, "42"),
    ],
)
def test_any_prompt_id_is_kept_as_text_as_comfyui_does(given: object, kept: str) -> None:
    assert parse({"prompt": {}, "prompt_id": given}).prompt_id == kept
