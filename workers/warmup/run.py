"""Running the warm-up: one tiny prompt per preloaded checkpoint, timed node by node, then the
speed probe on the same checkpoint.

The prompts (`workers.warmup.prompts.warmup_prompt`, `workers.warmup.prompts.probe_prompt`) go to
the instance
under a client id of their own, so no client and no relay ever sees their events; the time
between `executing` messages gives each node's seconds: the phases of a cold start, then the
seconds of a warm job.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workers.client import ComfyClient, Frame, WorkerError
from workers.comfy.families import family_of
from workers.warmup.prompts import (
    PROBE_STEPS,
    WarmupResult,
    phase_seconds,
    probe_prompt,
    probe_seconds,
    probe_work_units,
    warmup_prompt,
)

log = logging.getLogger(__name__)

PROBE_RUNS = 2
"""Runs of the speed probe; only the last is timed (`_probe`)."""


class WarmupError(RuntimeError):
    """The warm-up prompt was refused, failed, or did not finish in time."""


@dataclass(frozen=True)
class _Session:
    """One event socket of the warm-up: prompts run one after another under its client id."""

    client: ComfyClient
    frames: AsyncIterator[Frame]
    sid: str
    clock: Callable[[], float]

    async def run(self, prompt: Mapping[str, Any], timeout_s: float) -> dict[str, float]:
        """Submit `prompt` and wait until it ends; seconds per node id."""
        prompt_id = str(uuid.uuid4())
        await self.client.submit(prompt_id, prompt, client_id=self.sid)
        return await asyncio.wait_for(_node_seconds(self.frames, prompt_id, self.clock), timeout_s)


async def warm_up(
    client: ComfyClient,
    checkpoint: str,
    *,
    timeout_s: float,
    probe_steps: int = PROBE_STEPS,
    clock: Callable[[], float] = time.monotonic,
) -> WarmupResult:
    """Run the warm-up of `checkpoint` on the instance behind `client`; its cold timings, and
    (with `probe_steps` > 0) the speed probe's units and warm seconds.

    Raises WarmupError when the instance refuses the prompt (an unknown checkpoint), the
    prompt ends in an error, or it takes longer than `timeout_s`. A probe that fails or takes
    longer than `timeout_s` is only logged: the result then has no probe.
    """
    family = family_of(checkpoint)
    sid = f"comfy-gateway.warmup.{uuid.uuid4().hex[:12]}"
    try:
        async with client.events(sid) as frames:
            session = _Session(client, frames, sid, clock)
            started_s = clock()
            node_s = await session.run(warmup_prompt(checkpoint, family), timeout_s)
            seconds = clock() - started_s
            points = await _probe(session, checkpoint, family, probe_steps, timeout_s)
    except TimeoutError:
        raise WarmupError(f"warm-up of {checkpoint} took longer than {timeout_s:g} s") from None
    except WorkerError as exc:
        raise WarmupError(f"warm-up of {checkpoint} failed: {exc}") from exc
    none: tuple[float | None, float | None] = (None, None)
    native, small = (*points, none, none)[:2]
    return WarmupResult(checkpoint, seconds, family, phase_seconds(node_s), *native, *small)


async def _probe(
    session: _Session, checkpoint: str, family: str, steps: int, timeout_s: float
) -> list[tuple[float, float]]:
    """(work units, seconds of the non-loader nodes) of the speed probe at the family's native
    size, then at half its side; none when disabled (`steps` 0), and only those that ran when
    one failed, which must not fail the worker's start.

    Each size runs `PROBE_RUNS` times and the last run is timed: the first at a size still
    pays CUDA's first use of that shape (kernel selection, the VAE's first decode at that
    size), which made an H200 look 5-8x slower than its warm jobs."""
    points: list[tuple[float, float]] = []
    if steps <= 0:
        return points
    for small in (False, True):
        try:
            for _ in range(PROBE_RUNS):  # each a fresh seed: an identical prompt runs cached
                prompt = probe_prompt(checkpoint, family, steps=steps, small=small)
                node_s = await session.run(prompt, timeout_s)
        except (TimeoutError, WorkerError, WarmupError) as exc:
            why = (str(exc) or type(exc).__name__)[:300]
            log.warning("speed probe of %s failed (%s); speeds come from jobs", checkpoint, why)
            return points
        points.append((probe_work_units(family, steps, small=small), probe_seconds(node_s)))
    return points


async def _node_seconds(
    frames: AsyncIterator[Frame], prompt_id: str, clock: Callable[[], float]
) -> dict[str, float]:
    """Seconds per node id, from `executing` transitions, until the prompt's `executing null`."""
    node_s: dict[str, float] = {}
    current: tuple[str, float] | None = None
    async for frame in frames:
        data = _data_of(frame, prompt_id)
        if data is None:
            continue
        kind = frame["type"] if isinstance(frame, dict) else ""
        if kind in ("execution_error", "execution_interrupted"):
            raise WarmupError(f"warm-up prompt ended with {kind}: {_message(data)}")
        if kind != "executing":
            continue
        now_s = clock()
        if current is not None:
            node_s[current[0]] = node_s.get(current[0], 0.0) + now_s - current[1]
        node = data.get("node")
        if node is None:
            return node_s
        current = (str(node), now_s)
    raise WarmupError("the instance closed its event socket during the warm-up")


def _data_of(frame: Frame, prompt_id: str) -> Mapping[str, Any] | None:
    if not isinstance(frame, dict):
        return None
    data = frame.get("data")
    if isinstance(data, dict) and data.get("prompt_id") == prompt_id:
        return data
    return None


def _message(data: Mapping[str, Any]) -> str:
    text = data.get("exception_message") or data.get("exception_type") or "no message"
    return str(text).strip()[:300]
