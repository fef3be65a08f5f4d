"""What the gateway learned about its workers survives a restart, and only for the same launch."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway import tasks
from gateway.dispatch.links import WorkerLink
from gateway.farm import learned_store as memory
from gateway.farm.describe import learned_fields
from gateway.farm.learned_store import Memory
from gateway.jobs.keys import Keys
from gateway.learning.learn import Finished
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec
from workers.supervision.ports import free_port

KEYS = Keys("t")
SD15 = "v1-5-pruned-emaonly.safetensors"
SDXL = "sd_xl_base_1.0.safetensors"
FLUX = "flux1-dev-fp8.safetensors"
SPEC = WorkerSpec("w0", emulate="rtx4070ti", args=("--cache-lru", "2"))


class Clock:
    def __init__(self, now_ms: int = 1_800_000_000_000):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def link_of(spec: WorkerSpec = SPEC) -> WorkerLink:
    handle = WorkerHandle(spec, "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s")


def memory_of(
    redis: aioredis.Redis, node: str = "n1", time_scale: float = 1.0, interval_s: float = 5.0
) -> Memory:
    return Memory(
        redis, KEYS, node=node, now_ms=Clock(), time_scale=time_scale, interval_s=interval_s
    )


def taught(link: WorkerLink) -> WorkerLink:
    """Warm jobs of three families, of several sizes, and one that loaded."""
    for family, checkpoint in (("sd15", SD15), ("sdxl", SDXL), ("flux", FLUX)):
        for units, seconds in ((20.0, 2.1), (40.0, 3.9), (10.0, 1.3), (30.0, 3.05)):
            done = Finished(family, units, frozenset((checkpoint,)), 0.0, seconds, True)
            link.learn(done)
    link.learn(Finished("sdxl", 20.0, frozenset(("other.safetensors",)), 4.0, 2.0, False))
    return link


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def test_a_book_of_several_families_comes_back_exactly(redis: aioredis.Redis) -> None:
    before = taught(link_of())
    assert set(before.speed_book) == {"sd15", "sdxl", "flux"}
    assert before.speed_book["sd15"].observations == 3
    assert await memory_of(redis, "n1").save([before]) == 1
    after = link_of()
    assert await memory_of(redis, "n2").restore([after]) == 1
    assert after.speed_book == before.speed_book
    assert after.load_s == before.load_s and "other.safetensors" in after.load_s
    assert after.resident == ()  # residency is learned anew
    assert after.restored is not None and after.restored.node == "n1"


@pytest.mark.parametrize(
    "changed",
    [
        WorkerSpec("w0", emulate="rtx4070ti", args=("--cache-lru", "2", "--lowvram")),
        WorkerSpec("w0", emulate="h200", args=("--cache-lru", "2")),
        WorkerSpec("w0", emulate="rtx4070ti", args=("--cache-lru", "2"), gpu=1),
    ],
    ids=["flags", "profile", "gpu"],
)
async def test_another_launch_starts_from_scratch(
    redis: aioredis.Redis, changed: WorkerSpec
) -> None:
    await memory_of(redis).save([taught(link_of())])
    after = link_of(changed)
    assert await memory_of(redis).restore([after]) == 0
    assert after.speed_book == {} and after.load_s == {} and after.restored is None


async def test_an_emulated_worker_at_another_time_scale_starts_from_scratch(
    redis: aioredis.Redis,
) -> None:
    await memory_of(redis, time_scale=0.01).save([taught(link_of())])
    assert await memory_of(redis, time_scale=0.1).restore([link_of()]) == 0
    assert await memory_of(redis, time_scale=0.01).restore([link_of()]) == 1


def test_the_fingerprint_follows_the_launch_and_the_cards_not_the_name_or_port() -> None:
    real = WorkerSpec("w0", comfyui=Path("/opt/ComfyUI"), gpu=0, args=("--fast",))
    same = memory.fingerprint(real, cards=("NVIDIA H200",))
    renamed = WorkerSpec("w9", comfyui=Path("/opt/ComfyUI"), gpu=0, args=("--fast",), port=9)
    assert memory.fingerprint(renamed, cards=("NVIDIA H200",)) == same
    assert memory.fingerprint(real, cards=("NVIDIA H100",)) != same
    assert memory.fingerprint(real, cards=("NVIDIA H200",), time_scale=0.5) == same
    external = WorkerSpec("w0", url="http://a:8188")
    assert memory.fingerprint(external) != memory.fingerprint(WorkerSpec("w0", url="http://b:8188"))


def saved_text(**changes: object) -> str:
    link = taught(link_of())
    good = memory.Saved(memory.fingerprint(SPEC), 1, "n1", link.speed_book, link.load_s)
    body = json.loads(memory.encode(good))
    for path, value in changes.items():
        target = body
        *parents, last = path.split("__")
        for part in parents:
            target = target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return json.dumps(body)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        saved_text(version=99),
        saved_text(colour="blue"),
        saved_text(load_s=None),
        saved_text(book__sd15__per_unit_s="fast"),
        saved_text(book__sd15__drift=1.0),
        saved_text(book__sd15__weight=None),
        saved_text(book__sd15__observations=True),
        saved_text(book__sd15__observations=2.5),
        saved_text(book="sd15"),
        saved_text(load_s__x=float("nan")),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "version",
        "unknown-field",
        "missing-field",
        "not-a-number",
        "unknown-estimate-field",
        "missing-estimate-field",
        "bool",
        "fraction",
        "not-a-book",
        "nan",
    ],
)
async def test_a_corrupt_or_foreign_saved_state_is_ignored_with_a_warning(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    await redis.hset(KEYS.learned, mapping={"w0": text, "w1": saved_text()})
    bad, good = link_of(), link_of(WorkerSpec("w1", emulate="rtx4070ti", args=SPEC.args))
    with caplog.at_level(logging.WARNING, logger="gateway.farm.learned_store"):
        assert await memory_of(redis).restore([bad, good]) == 1
    assert bad.speed_book == {} and bad.load_s == {} and bad.restored is None
    assert good.restored is not None and set(good.speed_book) == {"sd15", "sdxl", "flux"}
    assert any("w0 ignored" in message for message in caplog.messages)


async def test_only_links_that_learned_since_their_last_save_are_written(
    redis: aioredis.Redis,
) -> None:
    keeper = memory_of(redis)
    idle, busy = link_of(WorkerSpec("idle")), taught(link_of())
    await keeper.restore([idle, busy])
    assert await keeper.save([idle, busy]) == 1
    assert await redis.hkeys(KEYS.learned) == ["w0"]
    assert await keeper.save([idle, busy]) == 0
    busy.learn(Finished("sd15", 20.0, frozenset((SD15,)), 0.0, 2.0, True))
    assert await keeper.save([idle, busy]) == 1
    stored = memory.decode(await redis.hget(KEYS.learned, "w0") or "")
    assert stored.book == busy.speed_book


async def test_the_save_loop_writes_what_moved_and_stops_on_cancel(redis: aioredis.Redis) -> None:
    link = link_of()
    keeper = memory_of(redis, interval_s=0.01)
    task = tasks.spawn("learned-memory", lambda: keeper.run([link]))
    taught(link)
    for _ in range(500):
        if await redis.hexists(KEYS.learned, "w0"):
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("the save loop wrote nothing within 5s")
    await tasks.stop([task], grace_s=2)
    assert task.cancelled()


async def test_redis_errors_while_saving_or_restoring_are_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = aioredis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=1)
    keeper = memory_of(down)
    link = taught(link_of())
    with caplog.at_level(logging.WARNING, logger="gateway.farm.learned_store"):
        assert await keeper.restore([link]) == 0
        assert await keeper.save([link]) == 0
    await down.aclose()
    assert any("not saved" in message for message in caplog.messages)
    assert any("not restored" in message for message in caplog.messages)


async def test_workers_show_what_was_learned_and_whether_it_was_restored(
    redis: aioredis.Redis,
) -> None:
    fresh = taught(link_of())
    shown = learned_fields(fresh)
    assert shown["restored"] is False and shown["restored_from"] is None
    await memory_of(redis, "n1").save([fresh])
    link = link_of()
    link.resident = (SD15,)
    await memory_of(redis, "n2").restore([link])
    shown = json.loads(json.dumps(learned_fields(link)))
    assert shown["restored"] is True and shown["restored_from"]["node"] == "n1"
    sd15 = link.speed_book["sd15"]
    assert shown["families"]["sd15"] == {
        "units_per_s": pytest.approx(sd15.speed, rel=1e-3),
        "fixed_s": pytest.approx(sd15.fixed_s, rel=1e-3, abs=1e-9),
        "observations": 3,
        "shifts": 0,
    }
    assert shown["load_s"] == {key: round(s, 3) for key, s in sorted(link.load_s.items())}
    assert shown["resident"] == [SD15]
