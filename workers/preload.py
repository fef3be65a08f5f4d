"""Running the warm-up: one tiny prompt per preloaded checkpoint, timed node by node.

The prompt (`workers.warmup.warmup_prompt`) goes to the instance under a client id of its own,
so no client and no relay ever sees its events; the time between `executing` messages gives
each node's seconds, and so the phases of a cold start.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from workers.client import ComfyClient, Frame, WorkerError
from workers.warmup import WarmupResult, phase_seconds, warmup_prompt


class WarmupError(RuntimeError):
    """The warm-up prompt was refused, failed, or did not finish in time."""


def guess_family(checkpoint: str) -> str | None:
    """The only family the warm-up must know: guidance-distilled models run at CFG 1."""
    return "flux" if "flux" in checkpoint.lower() else None


async def warm_up(
    client: ComfyClient,
    checkpoint: str,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> WarmupResult:
    """Run the warm-up of `checkpoint` on the instance behind `client`; its cold timings.

    Raises WarmupError when the instance refuses the prompt (an unknown checkpoint), the
    prompt ends in an error, or it takes longer than `timeout_s`.
    """
    family = guess_family(checkpoint)
    prompt_id = str(uuid.uuid4())
    sid = f"comfy-gateway.warmup.{uuid.uuid4().hex[:12]}"
    try:
        async with client.events(sid) as frames:
            started_s = clock()
            await client.submit(prompt_id, warmup_prompt(checkpoint, family), client_id=sid)
            node_s = await asyncio.wait_for(_node_seconds(frames, prompt_id, clock), timeout_s)
        seconds = clock() - started_s
    except TimeoutError:
        raise WarmupError(f"warm-up of {checkpoint} took longer than {timeout_s:g} s") from None
    except WorkerError as exc:
        raise WarmupError(f"warm-up of {checkpoint} failed: {exc}") from exc
    return WarmupResult(checkpoint, seconds, family, phase_seconds(node_s))


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
