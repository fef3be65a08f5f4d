"""One prompt's execution, message for message as ComfyUI 0.3.64's PromptExecutor.

execution_start, execution_cached, then per staged node: a cached output node gets `executed`
(old output) and a finished progress_state; any other node gets progress_state (running),
`executing`, the interrupt check, its work (sampler steps: progress_state, type-4 preview,
progress, type-1 preview), `executed` when it has a UI output, progress_state (finished).
The run ends with execution_success, execution_error or execution_interrupted.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from workers.comfy.graph import execution_order, is_link
from workers.comfy.messages import EventKind
from workers.comfy.workflow import checkpoint, sampler_nodes
from workers.emulator.card.profiles import DEFAULT_FAMILY, cost_family
from workers.emulator.execution import events
from workers.emulator.execution.nodeoutputs import MODEL_FILE_INPUTS, format_input
from workers.emulator.execution.progress import ProgressRegistry
from workers.emulator.execution.promptqueue import QueueItem
from workers.emulator.execution.runhost import RunHost
from workers.emulator.execution.work import NodeFailure, NodeWork, WorkContext
from workers.emulator.faults import PromptFaults

log = logging.getLogger(__name__)

TRACEBACK_ROOT = "/ComfyUI"


class Interrupted(Exception):
    """The interrupt flag was seen while `node_id` ran."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.node_id = node_id


class NodeError(Exception):
    """A node failed; carries what the execution_error reports."""

    def __init__(self, node_id: str, failure: NodeFailure, inputs: Mapping[str, Any]) -> None:
        super().__init__(failure.message)
        self.node_id = node_id
        self.failure = failure
        self.inputs = inputs


@dataclass
class RunOutcome:
    """What the worker stores in history after the run."""

    success: bool
    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def history_result(self) -> dict[str, Any]:
        return {"outputs": self.outputs, "meta": self.meta}

    def status(self) -> dict[str, Any]:
        return {
            "status_str": "success" if self.success else "error",
            "completed": self.success,
            "messages": copy.deepcopy([list(m) for m in self.messages]),
        }


class PromptRun:
    """Runs one queue item on an engine."""

    def __init__(self, engine: RunHost, item: QueueItem, faults: PromptFaults) -> None:
        self.engine = engine
        _, self.prompt_id, self.prompt, self.extra_data, self.outputs = item
        self.faults = faults
        self.client_id = engine.client_id
        self.outcome = RunOutcome(success=True)
        self.executed: list[str] = []
        self.progress = ProgressRegistry(self.prompt_id)
        self.steps_done = 0
        self.samplers = dict(sampler_nodes(self.prompt))

    def emit(self, event: events.Event) -> None:
        self.engine.hub.emit(event)

    def message(self, kind: EventKind, data: Mapping[str, Any], broadcast: bool = False) -> None:
        """ComfyUI's add_message: stamped, kept for history, sent to the client (or all)."""
        stamped = {**data, "timestamp": self.engine.now_ms()}
        self.outcome.messages.append((kind.value, stamped))
        if self.client_id is not None or broadcast:
            self.emit(events.lifecycle(kind, stamped, self.client_id))

    def _progress_state(self) -> None:
        self.emit(events.progress_state(self.prompt_id, self.progress.snapshot(), self.client_id))

    async def execute(self) -> RunOutcome:
        await self._step_faults(at_start=True)
        self.message(EventKind.EXECUTION_START, {"prompt_id": self.prompt_id})
        cached = self._start_caches()
        self.message(EventKind.EXECUTION_CACHED, {"nodes": cached, "prompt_id": self.prompt_id})
        order = execution_order(self.prompt, self.outputs, self.engine.catalog, cached=set(cached))
        work = self._work()
        try:
            await self._run_nodes(order, work)
        except Interrupted as stop:
            self._interrupted(stop.node_id)
        except NodeError as error:
            self._failed(error)
        else:
            self.message(EventKind.EXECUTION_SUCCESS, {"prompt_id": self.prompt_id})
        self._collect_ui()
        return self.outcome

    def _start_caches(self) -> list[str]:
        signatures: dict[str, Hashable] = self.engine.signatures(self.prompt)
        self.engine.outputs.set_prompt(signatures)
        self.engine.ui.set_prompt(signatures)
        return [node_id for node_id in self.prompt if self.engine.outputs.get(node_id) is not None]

    def _work(self) -> NodeWork:
        """The prompt's node work, with the load tier of each model it uses."""
        models = self._models()
        tiers = dict(
            zip((m for m, _ in models), self.engine.residency.run_prompt(models), strict=True)
        )
        costs = self.engine.costs
        upload = sum(costs.upload_s(f) for m, f in models if tiers[m] is not None)
        primary = checkpoint(self.prompt)
        family = cost_family(primary, costs.profile) if primary else DEFAULT_FAMILY
        context = WorkContext(
            self.prompt, self.extra_data, self.samplers, tiers, self._step, upload, family
        )
        return self.engine.node_work(context)

    def _models(self) -> list[tuple[str, str]]:
        """(model file, family) of every loader the outputs depend on, in execution order."""
        seen: dict[str, str] = {}
        for node_id in execution_order(self.prompt, self.outputs, self.engine.catalog):
            inputs = self.prompt[node_id].get("inputs", {})
            for name in MODEL_FILE_INPUTS:
                value = inputs.get(name)
                if isinstance(value, str) and value not in seen:
                    seen[value] = cost_family(value, self.engine.costs.profile)
        return list(seen.items())

    async def _run_nodes(self, order: list[str], work: NodeWork) -> None:
        if all(self.engine.outputs.get(node_id) is not None for node_id in order):
            await self.engine.spend(self.engine.costs.cached_prompt_s())
        for node_id in order:
            await self._node(node_id, work)
        await self._step_faults(at_end=True)

    async def _node(self, node_id: str, work: NodeWork) -> None:
        class_type = self.prompt[node_id]["class_type"]
        if self.engine.outputs.get(node_id) is not None:
            self._cached_node(node_id)
            return
        self.progress.start(node_id)
        self._progress_state()
        if self.client_id is not None:
            self.engine.entered(node_id)
            self.emit(events.executing(node_id, self.prompt_id, self.client_id))
        if self.engine.interrupted:
            raise Interrupted(node_id)
        inputs = self._inputs(node_id)
        try:
            if self.faults.fail_node in (node_id, class_type):
                raise NodeFailure(self.faults.fail_message, self.faults.fail_exception_type)
            result, ui = await work.run(node_id, class_type, inputs)
        except Interrupted:
            raise
        except NodeFailure as failure:
            raise NodeError(node_id, failure, inputs) from None
        except Exception as exc:  # a node that raises becomes an execution_error, as in ComfyUI
            log.exception("node %s (%s) raised", node_id, class_type)
            crash = NodeFailure(str(exc), _type_name(type(exc)))
            raise NodeError(node_id, crash, inputs) from exc
        self._finish(node_id, result, ui)

    def _cached_node(self, node_id: str) -> None:
        if self.client_id is not None:
            cached_ui = self.engine.ui.get(node_id) or {}
            output = cached_ui.get("output")
            self.emit(events.executed(node_id, output, self.prompt_id, self.client_id))
        self.progress.finish(node_id)
        self._progress_state()

    def _finish(self, node_id: str, result: tuple[Any, ...], ui: dict[str, Any] | None) -> None:
        if ui:
            meta = {
                "node_id": node_id,
                "display_node": node_id,
                "parent_node": None,
                "real_node_id": node_id,
            }
            self.engine.ui.set(node_id, {"meta": meta, "output": ui})
            if self.client_id is not None:
                self.emit(events.executed(node_id, ui, self.prompt_id, self.client_id))
        self.engine.outputs.set(node_id, result)
        self.progress.finish(node_id)
        self._progress_state()
        self.executed.append(node_id)

    def _inputs(self, node_id: str) -> dict[str, Any]:
        resolved: dict[str, Any] = {}
        for name, value in self.prompt[node_id].get("inputs", {}).items():
            resolved[name] = self._linked(value) if is_link(value) else value
        return resolved

    def _linked(self, link: list[Any]) -> Any:
        """The upstream output a link points to (None if it produced no such output)."""
        upstream = self.engine.outputs.get(link[0])
        index = int(link[1])
        if isinstance(upstream, tuple) and 0 <= index < len(upstream):
            return upstream[index]
        return None

    async def _step(
        self, node_id: str, value: int, total: int, preview: tuple[str, bytes] | None
    ) -> None:
        """ComfyUI's progress hook: interrupt check, progress_state, previews, progress."""
        if node_id in self.samplers:
            self.steps_done += 1
            await self._step_faults()
        if self.engine.interrupted:
            raise Interrupted(node_id)
        self.progress.update(node_id, value, total)
        self._progress_state()
        if preview is not None:
            meta = events.preview_metadata(node_id, self.prompt_id)
            self.emit(events.Preview(preview[1], preview[0], self.client_id, meta))
        self.emit(events.progress(value, total, self.prompt_id, node_id, self.client_id))
        if preview is not None:
            self.emit(events.Preview(preview[1], preview[0], self.client_id))

    async def _step_faults(self, *, at_start: bool = False, at_end: bool = False) -> None:
        """Crash or hang when the prompt reaches the armed step (or ends short of it)."""
        step = 0 if at_start else self.steps_done
        crash = self.faults.crash_at_step
        if crash is not None and (crash == step or (at_end and crash > step)):
            self.engine.crash(self.faults.crash_exit_code, self.prompt_id, step)
        hang = self.faults.hang_s
        due = self.faults.hang_at_step
        if hang is not None and (due == step or (at_end and due > step)):
            self.faults = replace(self.faults, hang_s=None)
            await self.engine.hang(hang, self.prompt_id, step)

    def _interrupted(self, node_id: str) -> None:
        self.outcome.success = False
        node_type = self.prompt[node_id]["class_type"]
        data = events.interrupted_data(self.prompt_id, node_id, node_type, self.executed)
        self.message(EventKind.EXECUTION_INTERRUPTED, data, broadcast=True)

    def _failed(self, error: NodeError) -> None:
        self.outcome.success = False
        node_type = self.prompt[error.node_id]["class_type"]
        data = {
            **events.interrupted_data(self.prompt_id, error.node_id, node_type, self.executed),
            "exception_message": f"{error.failure.message}\n",
            "exception_type": error.failure.exception_type,
            "traceback": _traceback(node_type),
            "current_inputs": {k: [format_input(v)] for k, v in error.inputs.items()},
            "current_outputs": list(self.prompt),
        }
        log.error("!!! Exception during processing !!! %s", error.failure.message)
        self.message(EventKind.EXECUTION_ERROR, data)

    def _collect_ui(self) -> None:
        for node_id in self.engine.ui.node_ids():
            info = self.engine.ui.get(node_id)
            if info is not None:
                self.outcome.outputs[node_id] = info["output"]
                self.outcome.meta[node_id] = info["meta"]


def _traceback(node_type: str) -> list[str]:
    """A plausible traceback (the emulator has no ComfyUI frames to show)."""
    return [
        f'  File "{TRACEBACK_ROOT}/execution.py", line 496, in execute\n',
        f'  File "{TRACEBACK_ROOT}/execution.py", line 315, in get_output_data\n',
        f'  File "{TRACEBACK_ROOT}/nodes.py", line 1, in {node_type}\n',
    ]


def _type_name(kind: type) -> str:
    """ComfyUI's full_type_name: builtins bare, others with their module."""
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
