"""What one prompt's WebSocket events tell of the nodes that ran, as learning needs it.

Pure: every function returns new values. The relay feeds each event of a prompt to its
`NodeClock` (`on_event`); when the prompt ends, `finished` says what ran:

- node seconds from the `executing` transitions: a node runs from its `executing` to the next
  one. Nodes listed in `execution_cached` never get an `executing` (ComfyUI sends nothing for
  them but their cached UI output), so they count for nothing: a cached loader loaded nothing,
  a cached sampler sampled nothing;
- the work units of the sampler nodes that executed, not of the whole prompt: a run whose
  samplers were all cached teaches no speed;
- sampler steps from `progress`: the time from a sampler's start to its first step beyond one
  step's time is set-up (the copy of freshly loaded weights to VRAM, CUDA's first use), which
  is load, not speed, so a job that loaded also teaches the speed of its steps;
- trust: the worker stamps `execution_start` and `execution_success`; when the relay's own
  span of the prompt differs much from the worker's (a stalled socket delivering events late,
  then in a burst), the node seconds are no measurement and the prompt is untimed; so is a
  prompt that failed or was interrupted (its sampler stopped short of its steps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.scheduler import cost
from gateway.scheduler.snapshot import JobView
from workers.comfy.messages import EventKind
from workers.comfy.workflow import sampler_work

__all__ = [
    "SKEW_FRACTION",
    "SKEW_SLACK_S",
    "Finished",
    "NodeClock",
    "Steps",
    "finished",
    "is_loader",
    "loaders_cached",
    "on_cached",
    "on_event",
    "on_executing",
    "on_progress",
    "started",
    "trusted",
]

SKEW_FRACTION = 0.25
"""The relay's span of a prompt may differ from the worker's by this fraction..."""
SKEW_SLACK_S = 0.05
"""...or by this many seconds (event-loop jitter, millisecond stamps), whichever is more."""


@dataclass(frozen=True)
class Steps:
    """One node's `progress` reports: when it started, its first and its latest step."""

    begin_s: float
    first_s: float
    first_value: int
    last_s: float
    last_value: int

    def setup_s(self) -> float | None:
        """Seconds before its first step beyond one step's time (the copy of the weights to
        VRAM, CUDA's first use), never negative; None with fewer than two steps reported."""
        if self.last_value <= self.first_value:
            return None
        step_s = (self.last_s - self.first_s) / (self.last_value - self.first_value)
        return max(self.first_s - self.begin_s - self.first_value * step_s, 0.0)


@dataclass(frozen=True)
class NodeClock:
    """One prompt's node times so far, from its events."""

    started_s: float = 0.0
    node: str | None = None
    since_s: float = 0.0
    node_s: Mapping[str, float] = field(default_factory=dict)
    """Seconds of each node that executed."""
    cached: frozenset[str] = frozenset()
    steps: Mapping[str, Steps] = field(default_factory=dict)
    """Progress of each node that reported steps."""
    start_stamp_ms: int | None = None
    """The worker's `timestamp` of `execution_start` (its wall clock)."""
    end_stamp_ms: int | None = None
    """The worker's `timestamp` of `execution_success`."""
    stopped: bool = False
    """It failed or was interrupted (`execution_error`, `execution_interrupted`)."""


def on_executing(clock: NodeClock, node: str | None, now_s: float) -> NodeClock:
    """The clock once `node` starts (None: the prompt ended) at `now_s`."""
    node_s = dict(clock.node_s)
    if clock.node is not None:
        node_s[clock.node] = node_s.get(clock.node, 0.0) + max(now_s - clock.since_s, 0.0)
    return replace(clock, node=node, since_s=now_s, node_s=node_s)


def on_cached(clock: NodeClock, nodes: object) -> NodeClock:
    """The clock once `execution_cached` listed `nodes`."""
    listed = frozenset(str(n) for n in nodes) if isinstance(nodes, list) else frozenset()
    return replace(clock, cached=clock.cached | listed)


def on_progress(clock: NodeClock, node: str | None, value: object, now_s: float) -> NodeClock:
    """The clock once the running `node` reported step `value` at `now_s` (a report of a node
    that is not running, or without an integer value, is ignored)."""
    if node is None or node != clock.node or not isinstance(value, int) or value < 1:
        return clock
    seen = clock.steps.get(node)
    if seen is None:
        steps = Steps(clock.since_s, now_s, value, now_s, value)
    elif value > seen.last_value:
        steps = replace(seen, last_s=now_s, last_value=value)
    else:
        return clock
    return replace(clock, steps={**clock.steps, node: steps})


def on_event(clock: NodeClock, kind: object, data: Mapping[str, Any], now_s: float) -> NodeClock:
    """The clock once an event of its prompt arrived at `now_s` (`execution_start` starts a
    new one: `started`)."""
    if kind == EventKind.EXECUTING:
        node = data.get("node")
        return on_executing(clock, None if node is None else str(node), now_s)
    if kind == EventKind.EXECUTION_CACHED:
        return on_cached(clock, data.get("nodes"))
    if kind == EventKind.PROGRESS:
        node = data.get("node")
        return on_progress(clock, None if node is None else str(node), data.get("value"), now_s)
    if kind == EventKind.EXECUTION_SUCCESS:
        return replace(clock, end_stamp_ms=_stamp(data))
    if kind in (EventKind.EXECUTION_ERROR, EventKind.EXECUTION_INTERRUPTED):
        return replace(clock, stopped=True)
    return clock


def started(data: Mapping[str, Any], now_s: float) -> NodeClock:
    """A new clock for a prompt whose `execution_start` (carrying `data`) arrived at `now_s`."""
    return NodeClock(started_s=now_s, since_s=now_s, start_stamp_ms=_stamp(data))


def _stamp(data: Mapping[str, Any]) -> int | None:
    stamp = data.get("timestamp")
    return stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else None


def trusted(clock: NodeClock) -> bool:
    """Whether the ended prompt's node seconds are a measurement: it ran to its end, and the
    relay's span of it agrees with the worker's stamps (when the worker stamped its start and
    end)."""
    if clock.stopped:
        return False
    if clock.start_stamp_ms is None or clock.end_stamp_ms is None or clock.node is not None:
        return True
    worker_s = (clock.end_stamp_ms - clock.start_stamp_ms) / 1000.0
    relay_s = clock.since_s - clock.started_s
    return abs(relay_s - worker_s) <= max(SKEW_FRACTION * worker_s, SKEW_SLACK_S)


def is_loader(class_type: object) -> bool:
    return isinstance(class_type, str) and "Loader" in class_type


@dataclass(frozen=True)
class Finished:
    """A finished prompt as learning sees it: only what executed counts."""

    family: str
    work_units: float
    """Work units of the sampler nodes that executed (0: every sampler was cached)."""
    models: frozenset[str]
    load_s: float | None = None
    """Seconds of its loader nodes that executed (None: not timed)."""
    run_s: float | None = None
    """Seconds of its other nodes that executed, set-up included (None: not timed)."""
    loader_cached: bool | None = None
    """True: every loader was cached (its models were resident); False: a loader executed."""
    setup_s: float | None = None
    """Seconds its executed samplers spent before their first step beyond one step's time
    (the copy of loaded weights to VRAM, CUDA's first use; None: their steps were not timed)."""
    first_use: bool = False
    """It was the first prompt of a worker started with nothing preloaded: its samplers'
    set-up also held the card's first use (CUDA's start-up), which no later load pays."""

    @property
    def warm_s(self) -> float | None:
        """Seconds of a warm run of what executed: `run_s` less the set-up (None: unknown)."""
        if self.run_s is None:
            return None
        return max(self.run_s - (self.setup_s or 0.0), 0.0)


def finished(job: JobView, prompt: Mapping[str, Any], clock: NodeClock | None) -> Finished:
    """What a prompt's node clock tells once it ended. Only nodes that executed count; a clock
    the worker's stamps contradict times nothing (its residency evidence still counts)."""
    models = cost.models_of(job)
    if clock is None or (not clock.node_s and not clock.cached):
        return Finished(job.family, 0.0, models)
    loaders = {node for node, body in prompt.items() if is_loader(_class_of(body))}
    executed = set(clock.node_s)
    cached = loaders_cached(loaders, executed, clock.cached)
    units = sampler_work(prompt)
    ran = sorted(node for node in units if node in executed)
    work = sum(units[node] for node in ran)
    if not clock.node_s or not trusted(clock):
        return Finished(job.family, work, models, loader_cached=cached)
    load = sum(s for node, s in clock.node_s.items() if node in loaders)
    run = sum(s for node, s in clock.node_s.items() if node not in loaders)
    return Finished(job.family, work, models, load, run, cached, _setup_s(clock, ran))


def loaders_cached(loaders: set[str], executed: set[str], cached: frozenset[str]) -> bool | None:
    """True: every loader that ran was cached; False: one executed; None: no loader ran."""
    if loaders & executed:
        return False  # one loader read its file: something was loaded
    if loaders & cached:
        return True
    return None


def _setup_s(clock: NodeClock, samplers: list[str]) -> float | None:
    """The set-up of the executed samplers, if each reported its steps."""
    total = 0.0
    for node in samplers:
        steps = clock.steps.get(node)
        setup = steps.setup_s() if steps is not None else None
        if setup is None:
            return None
        total += setup
    return total


def _class_of(body: object) -> object:
    return body.get("class_type") if isinstance(body, Mapping) else None
