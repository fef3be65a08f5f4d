"""The gateway as the command line reaches it over HTTP: reports, pinned runs, their images,
and the quality probe (one workflow and seed on each group, images compared)."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from gateway.ledger import quality

DEFAULT_URL = "http://127.0.0.1:8188"
POLL_S = 0.1


class RemoteError(RuntimeError):
    """The gateway answered with an error, or did not answer."""


class Gateway:
    """A gateway's HTTP API (a bearer token when it has one)."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, timeout_s: float = 30):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.http.close()

    def call(self, method: str, path: str, **options: Any) -> Any:
        try:
            answer = self.http.request(method, path, **options)
        except httpx.HTTPError as exc:
            where = self.http.base_url
            raise RemoteError(f"no answer from the gateway at {where}: {exc}") from None
        if answer.status_code != 200:
            raise RemoteError(f"{method} {path}: {answer.status_code} {_error(answer)}")
        return answer.json()

    def report(self, experiment: str) -> dict[str, Any]:
        body: dict[str, Any] = self.call(
            "GET", "/gateway/ab", params={"experiment": experiment, "jobs": "true"}
        )
        return body

    def prompt_of(self, job_id: str) -> dict[str, Any]:
        """The workflow a finished job ran (from its history entry)."""
        entry = self.call("GET", f"/history/{job_id}").get(job_id)
        if not entry:
            raise RemoteError(f"job {job_id} has no history entry")
        prompt: dict[str, Any] = entry["prompt"][2]
        return prompt

    def run(
        self, prompt: Mapping[str, Any], group: str | None = None, timeout_s: float = 600
    ) -> tuple[str, dict[str, Any]]:
        """Run a prompt (pinned to `group`), wait for it: its id and history entry."""
        extra = {"gateway": {"group": group}} if group else {}
        body = {"prompt": copy.deepcopy(dict(prompt)), "extra_data": extra}
        job_id = str(self.call("POST", "/prompt", json=body)["prompt_id"])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            entry = self.call("GET", f"/history/{job_id}").get(job_id)
            if entry:
                return job_id, entry
            time.sleep(POLL_S)
        raise RemoteError(f"job {job_id} did not finish within {timeout_s:.0f} s")

    def images(self, entry: Mapping[str, Any]) -> list[bytes]:
        """The image files a history entry lists, in node order."""
        found = []
        for node in sorted(entry.get("outputs") or {}):
            for item in entry["outputs"][node].get("images") or []:
                params = {k: item.get(k, "") for k in ("filename", "subfolder", "type")}
                answer = self.http.get("/view", params=params)
                if answer.status_code == 200:
                    found.append(answer.content)
        return found


def _error(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    error = body.get("error") if isinstance(body, dict) else body
    return str(error.get("message") if isinstance(error, dict) else error)


def probe_quality(
    gateway: Gateway, prompt: Mapping[str, Any], groups: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Run one workflow with one seed on each group (the first is the baseline) and judge
    each group's images against the baseline's (`gateway.ledger.quality.judge`)."""
    images = {group: gateway.images(gateway.run(prompt, group)[1]) for group in groups}
    baseline = images[groups[0]]
    return {group: quality.judge(baseline, found) for group, found in images.items()}
