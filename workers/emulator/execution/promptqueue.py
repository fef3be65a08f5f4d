"""ComfyUI's PromptQueue: the pending heap, the running items, the history and the /free flags.

Items are the 5-tuples ComfyUI keeps, `(number, prompt_id, prompt, extra_data, outputs)`, in a
`heapq` heap, so the pending order (and `GET /queue`'s unsorted heap array) is the real one,
ties included. Every change calls `on_change` (the `status` broadcast).
"""

from __future__ import annotations

import asyncio
import copy
import heapq
from collections.abc import Callable
from typing import Any

QueueItem = tuple[Any, str, dict[str, Any], dict[str, Any], list[str]]

MAX_HISTORY = 10000
# Removed from extra_data before the history entry is stored (visible in /queue until then).
SENSITIVE_EXTRA_DATA_KEYS = ("auth_token_comfy_org", "api_key_comfy_org")


class PromptQueue:
    """One instance's queue state; single-threaded (the event loop), so no locks."""

    def __init__(self, on_change: Callable[[int], None], max_history: int = MAX_HISTORY) -> None:
        self._on_change = on_change
        self._max_history = max_history
        self._pending: list[QueueItem] = []
        self._running: dict[int, QueueItem] = {}
        self._task_counter = 0
        self._history: dict[str, dict[str, Any]] = {}
        self._flags: dict[str, Any] = {}
        self._wake = asyncio.Event()
        self.number = 0

    def next_number(self, front: bool) -> int:
        """ComfyUI's own counter: used (and advanced) when a request gives no `number`."""
        number = -self.number if front else self.number
        self.number += 1
        return number

    def _changed(self) -> None:
        self._on_change(self.tasks_remaining())

    def tasks_remaining(self) -> int:
        return len(self._pending) + len(self._running)

    def put(self, item: QueueItem) -> None:
        heapq.heappush(self._pending, item)
        self._changed()
        self._wake.set()

    def has_pending(self) -> bool:
        return bool(self._pending)

    async def get(self) -> tuple[QueueItem, int] | None:
        """The next item and its running id; None when woken by a /free flag instead."""
        while not self._pending:
            self._wake.clear()
            await self._wake.wait()
            if not self._pending and self._flags:
                return None
        item = heapq.heappop(self._pending)
        item_id = self._task_counter
        self._running[item_id] = copy.deepcopy(item)
        self._task_counter += 1
        self._changed()
        return item, item_id

    def task_done(self, item_id: int, result: dict[str, Any], status: dict[str, Any]) -> None:
        """Store the history entry of a finished run (success, error or interrupt)."""
        item = self._running.pop(item_id)
        if len(self._history) > self._max_history:
            self._history.pop(next(iter(self._history)))
        for key in SENSITIVE_EXTRA_DATA_KEYS:
            item[3].pop(key, None)
        entry: dict[str, Any] = {"prompt": list(item), "outputs": {}, "status": status}
        entry.update(result)
        self._history[item[1]] = entry
        self._changed()

    def running(self) -> list[QueueItem]:
        return list(self._running.values())

    def pending(self) -> list[QueueItem]:
        """The raw heap array, as `GET /queue` shows it."""
        return list(self._pending)

    def running_ids(self) -> list[str]:
        return [item[1] for item in self._running.values()]

    def wipe(self) -> None:
        self._pending = []
        self._changed()

    def delete(self, prompt_id: object) -> bool:
        """Remove the first pending item with this id (two broadcasts when it was the last)."""
        for index, item in enumerate(self._pending):
            if item[1] == prompt_id:
                if len(self._pending) == 1:
                    self.wipe()
                else:
                    self._pending.pop(index)
                    heapq.heapify(self._pending)
                self._changed()
                return True
        return False

    def history(
        self, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1
    ) -> dict[str, Any]:
        """`GET /history` (oldest first; max_items alone = the newest N) or one entry."""
        if prompt_id is not None:
            entry = self._history.get(prompt_id)
            return {} if entry is None else {prompt_id: copy.deepcopy(entry)}
        if offset < 0 and max_items is not None:
            offset = len(self._history) - max_items
        out: dict[str, Any] = {}
        for index, key in enumerate(self._history):
            if index >= offset:
                out[key] = self._history[key]
                if max_items is not None and len(out) >= max_items:
                    break
        return out

    def wipe_history(self) -> None:
        self._history = {}

    def delete_history(self, prompt_id: object) -> None:
        if isinstance(prompt_id, str):
            self._history.pop(prompt_id, None)

    def set_flag(self, name: str, value: Any) -> None:
        """A /free flag; it wakes an idle worker so it applies at once."""
        self._flags[name] = value
        self._wake.set()

    def take_flags(self) -> dict[str, Any]:
        flags, self._flags = self._flags, {}
        return flags
