"""One job's phase ledger: where its time went, from the gateway's clock and its events.

A job's time splits into queue wait (accepted until claimed for this attempt), dispatch (sent
until the worker's `execution_start`) and execution, which the node clock of the relay
(`gateway.learning.timing.NodeClock`: a node runs from its `executing` to the next) splits into
phases
by node class: load (loader nodes), encode (text encoders), sample (sampler nodes), decode
(VAE decode), save (output nodes) and other (the rest, and what no node covers). Nodes listed
in `execution_cached` ran for nothing and are recorded as cached. With it go the facts that
tell a cold job from a warm one (its ordinal on the worker's process, whether a loader
executed), where it ran (worker, group, launch args, attempt) and what it was (model family,
workflow shape: the graph without its seeds and texts).

Pure: the ledger is a plain JSON-able dict, bounded (`MAX_NODES` nodes, `MAX_OUTPUTS` files).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.learning.timing import NodeClock, is_loader, loaders_cached, trusted
from workers.comfy.families import family_of

PHASES = ("load", "encode", "sample", "decode", "save", "other")
MAX_NODES = 64
"""Nodes listed one by one in a ledger; a bigger graph lists its slowest."""
MAX_OUTPUTS = 16
SEED_INPUTS = frozenset({"seed", "noise_seed"})
TEXT_INPUTS = frozenset({"text", "text_g", "text_l", "clip_l", "t5xxl"})
SAVE_CLASSES = frozenset({"SaveImage", "PreviewImage", "SaveAnimatedWEBP", "SaveAnimatedPNG"})


PREFIXES = (
    ("CLIPTextEncode", "encode"),
    ("KSampler", "sample"),
    ("SamplerCustom", "sample"),
    ("VAEDecode", "decode"),
    ("Save", "save"),
)


def phase_of(class_type: object) -> str:
    """The phase a node of `class_type` belongs to."""
    if not isinstance(class_type, str):
        return "other"
    return _phase_of_class(class_type)


@functools.lru_cache(maxsize=4096)
def _phase_of_class(class_type: str) -> str:
    if is_loader(class_type):
        return "load"
    if class_type in SAVE_CLASSES:
        return "save"
    return next((phase for prefix, phase in PREFIXES if class_type.startswith(prefix)), "other")


def shape_of(prompt: Mapping[str, Any]) -> str:
    """The workflow's shape: a digest of its graph without seeds and texts, so that the same
    workflow run with new seeds and prompts has the same shape."""
    return _digest(repr([(node, _bare(prompt[node])) for node in sorted(prompt)]))


def inputs_of(prompt_json: str) -> str:
    """A digest of the whole graph as stored, seeds and texts included: the same image is
    expected of two jobs with the same digest."""
    return _digest(prompt_json)


def _bare(body: object) -> object:
    """A node without its seeds and texts, as comparable text."""
    if not isinstance(body, dict):
        return body
    inputs = body.get("inputs")
    kept = sorted(
        (key, value)
        for key, value in (inputs.items() if isinstance(inputs, dict) else ())
        if key not in SEED_INPUTS and not (key in TEXT_INPUTS and isinstance(value, str))
    )
    return (body.get("class_type"), kept)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Placed:
    """Where and how the job ran."""

    worker: str
    group: str
    args: tuple[str, ...]
    attempt: int
    process_job: int
    """Its ordinal among the jobs of the worker's current process (1: the first)."""
    experiment: str | None = None


@dataclass(frozen=True)
class Times:
    """The gateway's stamps of the job (ms since the epoch) and of its dispatch (seconds)."""

    job_id: str
    enqueued_at_ms: int
    claimed_at_ms: int | None
    finished_at_ms: int
    dispatch_s: float | None
    """Sent until `execution_start` arrived, on the relay's clock."""


def ledger(
    prompt: Mapping[str, Any],
    prompt_json: str,
    clock: NodeClock | None,
    placed: Placed,
    times: Times,
    *,
    checkpoint: str | None,
    state: str,
    outputs: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The ledger of a job that ended on a worker (`prompt_json`: its prompt as stored)."""
    nodes = _nodes(prompt, clock)
    exec_s = _exec_s(clock)
    phases = _phases(nodes, exec_s)
    loaded = _loaded(prompt, clock)
    return {
        "job_id": times.job_id,
        "worker": placed.worker,
        "group": placed.group,
        "args": list(placed.args),
        "attempt": placed.attempt,
        "experiment": placed.experiment,
        "state": state,
        "family": family_of(checkpoint),
        "checkpoint": checkpoint,
        "shape": shape_of(prompt),
        "inputs": inputs_of(prompt_json),
        "finished_at_ms": times.finished_at_ms,
        "queue_s": _span_s(times.enqueued_at_ms, times.claimed_at_ms),
        "dispatch_s": _rounded(times.dispatch_s),
        "exec_s": _rounded(exec_s),
        "total_s": _span_s(times.enqueued_at_ms, times.finished_at_ms),
        "phases": phases,
        "timed": clock is not None and exec_s is not None and trusted(clock),
        "cold": placed.process_job == 1 or loaded is True,
        "process_job": placed.process_job,
        "loaded": loaded,
        "cached": sorted(clock.cached)[:MAX_NODES] if clock else [],
        "nodes": _listed(nodes),
        "outputs": [dict(item) for item in outputs[:MAX_OUTPUTS]],
    }


def _nodes(prompt: Mapping[str, Any], clock: NodeClock | None) -> list[tuple[str, str, float]]:
    """(node id, class type, seconds) of each node that executed."""
    if clock is None:
        return []
    return [(node, str(_class_of(prompt.get(node))), s) for node, s in clock.node_s.items()]


def _exec_s(clock: NodeClock | None) -> float | None:
    """Seconds from `execution_start` to the end, once the prompt ended (`executing` null)."""
    if clock is None or clock.node is not None or (not clock.node_s and not clock.cached):
        return None
    return max(clock.since_s - clock.started_s, 0.0)


def _phases(nodes: Sequence[tuple[str, str, float]], exec_s: float | None) -> dict[str, float]:
    """Seconds per phase; what no node covers (before the first node ran) counts as other."""
    phases = dict.fromkeys(PHASES, 0.0)
    for _, class_type, seconds in nodes:
        phases[phase_of(class_type)] += seconds
    if exec_s is not None:
        phases["other"] += max(exec_s - sum(phases.values()), 0.0)
    return {phase: round(seconds, 6) for phase, seconds in phases.items()}


def _loaded(prompt: Mapping[str, Any], clock: NodeClock | None) -> bool | None:
    """True: a loader node executed (models were read); False: every loader was cached;
    None: the prompt has no loader, or nothing was timed."""
    if clock is None:
        return None
    loaders = {node for node, body in prompt.items() if is_loader(_class_of(body))}
    cached = loaders_cached(loaders, set(clock.node_s), clock.cached)
    return None if cached is None else not cached


def _class_of(body: object) -> object:
    return body.get("class_type") if isinstance(body, dict) else None


def _listed(nodes: Sequence[tuple[str, str, float]]) -> dict[str, list[Any]]:
    slowest = sorted(nodes, key=lambda n: -n[2])[:MAX_NODES]
    return {
        node: [class_type, phase_of(class_type), round(s, 6)] for node, class_type, s in slowest
    }


def _span_s(begin_ms: int | None, end_ms: int | None) -> float | None:
    if begin_ms is None or end_ms is None:
        return None
    return max(end_ms - begin_ms, 0) / 1000.0


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 6)
