"""The queue state: heap order, running items, history paging, flags (PROTOCOL.md 1.2-1.3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workers.emulator.execution.promptqueue import PromptQueue, QueueItem


def item(number: Any, prompt_id: str, extra: dict[str, Any] | None = None) -> QueueItem:
    return (number, prompt_id, {"1": {}}, extra if extra is not None else {}, ["1"])


@pytest.fixture
def changes() -> list[int]:
    return []


@pytest.fixture
def queue(changes: list[int]) -> PromptQueue:
    return PromptQueue(changes.append, max_history=3)


def test_counter_and_front(queue: PromptQueue) -> None:
    assert [queue.next_number(False), queue.next_number(False), queue.next_number(True)] == [
        0,
        1,
        -2,
    ]


async def test_pending_is_a_heap_and_get_takes_the_lowest(
    queue: PromptQueue, changes: list[int]
) -> None:
    for number, prompt_id in [(14, "a"), (13, "b"), (-15, "c")]:
        queue.put(item(number, prompt_id))
    assert [entry[0] for entry in queue.pending()] == [-15, 14, 13]
    taken = await queue.get()
    assert taken is not None and taken[0][1] == "c"
    assert queue.running_ids() == ["c"]
    assert changes == [1, 2, 3, 3]


async def test_equal_numbers_order_by_prompt_id(queue: PromptQueue) -> None:
    queue.put(item(1, "b"))
    queue.put(item(1, "a"))
    first = await queue.get()
    assert first is not None and first[0][1] == "a"


def test_deleting_the_last_pending_item_broadcasts_twice(
    queue: PromptQueue, changes: list[int]
) -> None:
    queue.put(item(1, "a"))
    changes.clear()
    assert queue.delete("a")
    assert changes == [0, 0]
    assert not queue.delete("a")


async def test_task_done_stores_history_without_secrets(queue: PromptQueue) -> None:
    queue.put(item(0, "p", {"api_key_comfy_org": "k", "client_id": "c"}))
    taken = await queue.get()
    assert taken is not None
    assert queue.running()[0][3] == {"api_key_comfy_org": "k", "client_id": "c"}
    queue.task_done(taken[1], {"outputs": {"1": {}}, "meta": {}}, {"status_str": "success"})
    entry = queue.history("p")["p"]
    assert entry["prompt"][3] == {"client_id": "c"}
    assert entry["outputs"] == {"1": {}}
    assert queue.running() == []


async def finish(queue: PromptQueue, prompt_id: str) -> None:
    queue.put(item(0, prompt_id))
    taken = await queue.get()
    assert taken is not None
    queue.task_done(taken[1], {}, {})


@pytest.mark.parametrize(
    ("max_items", "offset", "expected"),
    [
        (None, -1, ["a", "b", "c"]),
        (2, -1, ["b", "c"]),
        (2, 0, ["a", "b"]),
        (1, 1, ["b"]),
        (None, 2, ["c"]),
        (0, -1, []),
    ],
)
async def test_history_paging(
    queue: PromptQueue, max_items: int | None, offset: int, expected: list[str]
) -> None:
    for prompt_id in "abc":
        await finish(queue, prompt_id)
    assert list(queue.history(max_items=max_items, offset=offset)) == expected


async def test_history_keeps_at_most_the_limit_plus_one(queue: PromptQueue) -> None:
    for prompt_id in "abcdef":
        await finish(queue, prompt_id)
    assert list(queue.history()) == ["c", "d", "e", "f"]  # ComfyUI checks before inserting


async def test_a_free_flag_wakes_an_idle_getter(queue: PromptQueue) -> None:
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.set_flag("free_memory", True)
    assert await asyncio.wait_for(getter, 1) is None
    assert queue.take_flags() == {"free_memory": True}
    assert queue.take_flags() == {}
