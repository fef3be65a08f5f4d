"""The prompt worker: one prompt at a time off the heap, then the /free flags.

As ComfyUI's `prompt_worker`: take the item (status broadcast), run it, store the history entry
(status broadcast), send `executing {node: null}` to the client, log "Prompt executed in X
seconds", then apply `unload_models` / `free_memory`. It runs as a task on the server's event
loop; time passes through the injected `sleep`, so a test can run it at any speed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from workers.comfy.catalog import Catalog
from workers.comfy.graph import node_signatures
from workers.emulator.card.costmodel import CostModel
from workers.emulator.card.profiles import cost_family
from workers.emulator.card.residency import Residency
from workers.emulator.execution import events
from workers.emulator.execution.nodecache import NodeCache
from workers.emulator.execution.promptqueue import PromptQueue, QueueItem
from workers.emulator.execution.promptrun import PromptRun
from workers.emulator.execution.runhost import Emitter
from workers.emulator.execution.work import (
    FILE_IMAGE_LOADERS,
    Instance,
    NodeWork,
    WorkContext,
    WorkOptions,
)
from workers.emulator.faults import Faults
from workers.emulator.files import Dirs

log = logging.getLogger(__name__)


@dataclass
class PromptCounts:
    started: int = 0
    succeeded: int = 0
    failed: int = 0


def _wall_ms() -> int:
    return int(time.time() * 1000)


def hard_exit(code: int) -> None:
    """Leave at once, as a crashing ComfyUI does: no cleanup, no flush of open sockets."""
    os._exit(code)


def format_duration(seconds: float) -> str:
    """ComfyUI's log form: "1.30 seconds", or HH:MM:SS above ten minutes."""
    if seconds > 600:
        return time.strftime("%H:%M:%S", time.gmtime(seconds))
    return f"{seconds:.2f} seconds"


class Pacer:
    """Sleeps that add up: each one aims at a running deadline, so the emulated card's time
    runs on whatever the host does meanwhile. The overshoot of many tiny sleeps (a 20-step job
    at time scale 0.01 is 20 sleeps of a fraction of a millisecond), a wake-up made late by a
    busy machine, and the host's own work between two sleeps (writing a PNG, answering a
    request) are paid back by the next sleeps instead of piling up: a prompt lasts what the
    cost model says, or what the host needs if that is longer. Only `restart` forgets what is
    owed: after the card sat idle, or hung, that time was not the cost model's to pay."""

    def __init__(
        self, sleep: Callable[[float], Awaitable[None]], clock: Callable[[], float]
    ) -> None:
        self._sleep, self._clock = sleep, clock
        self._deadline = clock()

    def restart(self) -> None:
        """The card's time starts now: nothing is owed from before."""
        self._deadline = self._clock()

    async def spend(self, seconds: float) -> None:
        self._deadline += seconds
        await self._sleep(max(0.0, self._deadline - self._clock()))


@dataclass(frozen=True)
class Card:
    """The emulated card: what work costs on it, and which models stay loaded."""

    costs: CostModel
    residency: Residency


@dataclass(frozen=True)
class World:
    """What the engine asks of the world: to wait, the two clocks, and to end the process
    (injected, so tests run on fake time and a crash fault does not end the test run)."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic
    now_ms: Callable[[], int] = _wall_ms
    """Wall-clock milliseconds, for the timestamps ComfyUI reports."""
    exit_process: Callable[[int], None] = hard_exit


class Engine:
    """Executes queued prompts on one emulated instance."""

    def __init__(
        self,
        *,
        queue: PromptQueue,
        hub: Emitter,
        catalog: Catalog,
        card: Card,
        dirs: Dirs,
        faults: Faults,
        options: WorkOptions,
        world: World = World(),
    ) -> None:
        costs, sleep, monotonic = card.costs, world.sleep, world.monotonic
        self.queue, self.hub, self.catalog, self.costs = queue, hub, catalog, costs
        self.residency, self.dirs, self.faults, self.options = card.residency, dirs, faults, options
        self._sleep, self._monotonic, self.now_ms = sleep, monotonic, world.now_ms
        self._exit_process = world.exit_process
        self._unload_after_prompt = options.unload_after_prompt
        self._pacer = Pacer(sleep, monotonic)
        mode, size = costs.flags.cache_mode, costs.flags.cache_lru_size
        self.outputs, self.ui = NodeCache(mode, size), NodeCache(mode, size)
        self.instance = Instance(files_read=card.residency.page_cache)
        self.counts = PromptCounts()
        self.client_id: str | None = None
        self.last_node_id: str | None = None
        self.last_prompt_id: str | None = None
        self.interrupted = False

    async def run(self) -> None:
        """Serve the queue forever (cancel the task to stop)."""
        self._pacer.restart()
        while True:
            # A prompt that was waiting starts when the one before ended on the card, so the
            # host's work since (that prompt's history, this one's set-up) is paid back; one
            # that found the card idle starts its clock now.
            idle = not self.queue.has_pending()
            taken = await self.queue.get()
            if idle:
                self._pacer.restart()
            if taken is not None:
                await self.process(*taken)
            self.apply_flags(self.queue.take_flags())

    async def process(self, item: QueueItem, item_id: int) -> None:
        """Run one taken item to its history entry and final `executing` frame."""
        started = self._monotonic()
        prompt_id = item[1]
        self.last_prompt_id = prompt_id
        self.interrupted = False
        extra = item[3] if isinstance(item[3], dict) else {}
        self.client_id = extra.get("client_id")
        faults = self.faults.take_for_prompt()
        if self.faults.poisons(item[2]):
            faults = replace(faults, crash_at_step=1)
        if faults.stall_ws_s:
            self.hub.stall_for(faults.stall_ws_s)
        self.counts.started += 1
        outcome = await PromptRun(self, item, faults).execute()
        self.last_node_id = None
        if self._unload_after_prompt:
            self.residency.unload_models()
        self.queue.task_done(item_id, outcome.history_result(), outcome.status())
        if self.client_id is not None:
            self.hub.emit(events.executing_done(prompt_id, self.client_id))
        if outcome.success:
            self.counts.succeeded += 1
        else:
            self.counts.failed += 1
        log.info("Prompt executed in %s", format_duration(self._monotonic() - started))

    def apply_flags(self, flags: Mapping[str, Any]) -> None:
        """POST /free: unload_models moves weights out of VRAM; free_memory also drops caches."""
        free_memory = bool(flags.get("free_memory", False))
        if flags.get("unload_models", free_memory):
            self.residency.unload_models()
        if free_memory:
            self.outputs.clear()
            self.ui.clear()
            self.residency.forget_all()

    def entered(self, node_id: str) -> None:
        """The running prompt starts executing `node_id`."""
        self.last_node_id = node_id

    def interrupt(self) -> None:
        """Set the interrupt flag (cleared when the next prompt starts)."""
        self.interrupted = True

    async def spend(self, seconds: float) -> None:
        """Let `seconds` of emulated work pass (scaled by time scale and slow factor)."""
        scaled = max(0.0, seconds) * self.options.time_scale * self.faults.slow_factor
        await self._pacer.spend(scaled)

    async def hang(self, seconds: float, prompt_id: str, step: int) -> None:
        log.warning("fault: prompt %s hangs %.2f s at step %d", prompt_id, seconds, step)
        await self._sleep(seconds)
        self._pacer.restart()  # a hang adds its seconds: the steps after it are not shortened

    def crash(self, code: int, prompt_id: str, step: int) -> None:
        log.warning("fault: exiting with code %d at step %d of prompt %s", code, step, prompt_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
        self._exit_process(code)

    def signatures(self, prompt: Mapping[str, Any]) -> dict[str, Hashable]:
        return node_signatures(prompt, self.catalog, self._is_changed)

    def _is_changed(self, node_id: str, node: Mapping[str, Any]) -> Any:
        """IS_CHANGED of the classes that have one: file hashes, or always new."""
        class_type = node.get("class_type")
        if class_type == "SaveImageWebsocket":
            return uuid.uuid4().hex
        if class_type not in FILE_IMAGE_LOADERS:
            return False
        name = node.get("inputs", {}).get("image")
        try:
            with open(self.dirs.annotated_path(str(name)), "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
        except OSError:
            return float("nan")  # a fresh NaN object: never equal, so never a cache hit

    def node_work(self, context: WorkContext) -> NodeWork:
        return NodeWork(
            catalog=self.catalog,
            costs=self.costs,
            dirs=self.dirs,
            options=self.options,
            instance=self.instance,
            spend=self.spend,
            context=context,
        )

    def vram_used_mib(self) -> float:
        profile = self.costs.profile
        return sum(
            profile.family(cost_family(m, profile)).model_size_mib
            for m in self.residency.resident()
        )
