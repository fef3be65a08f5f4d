"""What one prompt's run (`workers.emulator.execution.promptrun.PromptRun`) needs of the engine that
runs it: a narrow view, so that the run reads the engine's parts and tells it which node it is
in, and never writes the engine's fields (the engine owns them).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from workers.comfy.catalog import Catalog
from workers.emulator.card.costmodel import CostModel
from workers.emulator.card.residency import Residency
from workers.emulator.execution import events
from workers.emulator.execution.nodecache import NodeCache
from workers.emulator.execution.work import NodeWork, WorkContext


class Emitter(Protocol):
    """Where events go (the socket hub)."""

    def emit(self, event: events.Event) -> None: ...

    def stall_for(self, seconds: float) -> None: ...


class RunHost(Protocol):
    """The engine as one run sees it."""

    @property
    def hub(self) -> Emitter: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def costs(self) -> CostModel: ...
    @property
    def residency(self) -> Residency: ...
    @property
    def outputs(self) -> NodeCache: ...
    @property
    def ui(self) -> NodeCache: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def now_ms(self) -> Callable[[], int]: ...

    def entered(self, node_id: str) -> None:
        """The run starts executing `node_id` (a reconnecting client is told so)."""

    def signatures(self, prompt: Mapping[str, Any]) -> dict[str, Hashable]: ...
    def node_work(self, context: WorkContext) -> NodeWork: ...
    async def spend(self, seconds: float) -> None: ...
    async def hang(self, seconds: float, prompt_id: str, step: int) -> None: ...
    def crash(self, code: int, prompt_id: str, step: int) -> None: ...
