"""What the gateway learned about each worker, kept in Redis across restarts.

Each worker's speed book (every field of each family's `SpeedEstimate`, so learning continues
exactly where it stopped) and load seconds are saved as JSON under its name in one hash
(`Keys.learned`), with a fingerprint of what makes the numbers valid: how the worker is launched
(emulated profile and time scale, or ComfyUI path, Python or URL; launch args; GPU slot) and the
cards of its slot. A node that starts restores the state whose fingerprint matches its own view
of the worker, so a changed flag set or card starts from scratch; so does a second node that
owns the same worker name (that is how nodes share it). Residency is not kept: a restarted
gateway restarts or re-adopts its workers and learns what they hold anew.

Saving never reaches dispatch: learning only bumps `WorkerLink.lessons`, a background loop
writes the links whose count moved at most every `SAVE_EVERY_S`, and once more at stop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gateway import tasks
from gateway.dispatch.links import Restored, WorkerLink
from gateway.jobs.keys import Keys
from gateway.learning.speed import SpeedEstimate
from workers.supervision.launch import WorkerSpec
from workers.telemetry import Telemetry

log = logging.getLogger(__name__)

VERSION = 4
"""The saved format; another version is ignored (learning starts over). Version 3: speeds
learned only from sampler nodes that executed (a version-2 book may hold a cached run's
near-instant speed). Version 4: each estimate keeps its seed's weight apart
(`SpeedEstimate.prior_weight`), so one job size never redraws the fixed/per-unit split."""
SAVE_EVERY_S = 5.0
FIELDS = frozenset({"version", "fingerprint", "saved_at_ms", "node", "book", "load_s"})
ESTIMATE_FIELDS = frozenset(f.name for f in dataclasses.fields(SpeedEstimate))
INT_FIELDS = frozenset({"observations", "shifts"})


@dataclass(frozen=True)
class Saved:
    """One worker's learned state as saved."""

    fingerprint: str
    saved_at_ms: int
    node: str
    """The gateway node that saved it."""
    book: Mapping[str, SpeedEstimate]
    load_s: Mapping[str, float]


def fingerprint(spec: WorkerSpec, *, time_scale: float = 1.0, cards: Sequence[str] = ()) -> str:
    """What the learned numbers of a worker are valid for. Its name, group, port, preload and
    emulated catalog change no speed and are left out; so are real cards for an emulated worker
    (its profile is its card), and the time scale for a real one."""
    emulated = spec.emulate is not None
    identity = {
        "emulate": spec.emulate,
        "time_scale": time_scale if emulated else None,
        "comfyui": None if spec.comfyui is None else str(spec.comfyui),
        "python": spec.python,
        "url": spec.url,
        "args": list(spec.args),
        "gpu": None if spec.gpu is None else str(spec.gpu),
        "cards": [] if emulated else list(cards),
    }
    text = json.dumps(identity, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def card_names(telemetry: Telemetry | None, indices: Sequence[int]) -> tuple[str, ...]:
    """The model of each card of a slot, as NVML names it ("?" for one not read; none
    without telemetry)."""
    snapshot = telemetry.snapshot() if telemetry is not None else None
    if snapshot is None or not snapshot.available:
        return ()
    return tuple(snapshot.gpus[i].name if i in snapshot.gpus else "?" for i in indices)


def encode(saved: Saved) -> str:
    """JSON of the saved state; ValueError if a number is not finite."""
    body = {
        "version": VERSION,
        "fingerprint": saved.fingerprint,
        "saved_at_ms": saved.saved_at_ms,
        "node": saved.node,
        "book": {family: dataclasses.asdict(est) for family, est in saved.book.items()},
        "load_s": dict(saved.load_s),
    }
    return json.dumps(body, sort_keys=True, allow_nan=False)


def decode(text: str | bytes) -> Saved:
    """The saved state from its JSON; ValueError, saying why, for anything else (corrupt,
    another version, unknown or missing fields, numbers that are not finite)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("version") != VERSION:
        raise ValueError(f"format version {data.get('version')!r}, expected {VERSION}")
    _exact_fields(data, FIELDS, "state")
    return Saved(
        fingerprint=_text(data["fingerprint"], "fingerprint"),
        saved_at_ms=_integer(data["saved_at_ms"], "saved_at_ms"),
        node=_text(data["node"], "node"),
        book={_text(f, "family"): _estimate(e, f) for f, e in _object(data["book"], "book")},
        load_s={_text(k, "key"): _number(s, k) for k, s in _object(data["load_s"], "load_s")},
    )


def _exact_fields(data: Mapping[str, Any], expected: frozenset[str], what: str) -> None:
    unknown, missing = set(data) - expected, expected - set(data)
    if unknown or missing:
        raise ValueError(f"{what}: unknown fields {sorted(unknown)}, missing {sorted(missing)}")


def _estimate(value: object, family: str) -> SpeedEstimate:
    fields = dict(_object(value, family))
    _exact_fields(fields, ESTIMATE_FIELDS, family)
    numbers: dict[str, Any] = {
        name: _integer(v, name) if name in INT_FIELDS else _number(v, name)
        for name, v in fields.items()
    }
    return SpeedEstimate(**numbers)


def _object(value: object, what: str) -> Iterable[tuple[str, object]]:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: not a JSON object")
    return value.items()


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what}: not a string")
    return value


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what}: not a finite number")
    return float(value)


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: not a natural number")
    return value


class Memory:
    """The learned state of this node's workers in Redis: restored at start, saved when it
    moved. Redis errors are logged, never raised."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        node: str,
        now_ms: Callable[[], int],
        time_scale: float = 1.0,
        telemetry: Telemetry | None = None,
        interval_s: float = SAVE_EVERY_S,
    ):
        self.redis = redis
        self.keys = keys
        self.node = node
        self.now_ms = now_ms
        self.time_scale = time_scale
        self.telemetry = telemetry
        self.interval_s = interval_s
        self._saved: dict[str, int] = {}
        """`lessons` of each link when it was last saved."""
        self._fingerprints: dict[str, str] = {}

    def fingerprint(self, link: WorkerLink) -> str:
        """The link's fingerprint as first seen (at start): a card that telemetry loses later
        does not change what its numbers were learned on."""
        known = self._fingerprints.get(link.name)
        if known is None:
            spec = link.handle.spec
            cards = card_names(self.telemetry, spec.gpu_indices)
            known = fingerprint(spec, time_scale=self.time_scale, cards=cards)
            self._fingerprints[link.name] = known
        return known

    async def restore(self, links: Iterable[WorkerLink]) -> int:
        """Give each link the state saved for it, where its fingerprint matches; how many."""
        try:
            raw = await self.redis.hgetall(self.keys.learned)
        except RedisError as exc:
            log.warning("learned state not restored: %r", exc)
            return 0
        restored = 0
        for link in links:
            text = raw.get(link.name)
            if text is not None and self._restore(link, text):
                restored += 1
        return restored

    def _restore(self, link: WorkerLink, text: str | bytes) -> bool:
        try:
            saved = decode(text)
        except ValueError as exc:
            log.warning("learned state of %s ignored: %s", link.name, exc)
            return False
        if saved.fingerprint != self.fingerprint(link):
            log.info("learned state of %s not restored: saved for another launch", link.name)
            return False
        # What this run measured already (none at start, normally) wins over the saved state.
        link.speed_book = {**saved.book, **link.speed_book}
        link.load_s = {**saved.load_s, **link.load_s}
        now_ms = self.now_ms()
        link.restored = Restored(saved.node, saved.saved_at_ms, now_ms)
        log.info(
            "learned state of %s restored: %d families, %d load times, saved by %s %.0fs ago",
            link.name,
            len(saved.book),
            len(saved.load_s),
            saved.node,
            (now_ms - saved.saved_at_ms) / 1000,
        )
        return True

    async def save(self, links: Iterable[WorkerLink]) -> int:
        """Write the links that learned since they were last saved; how many were written."""
        moved = [link for link in links if link.lessons != self._saved.get(link.name, 0)]
        lessons = {link.name: link.lessons for link in moved}
        records: dict[Any, Any] = {}  # redis-py types mapping keys as invariant unions
        for link in moved:
            text = self._encoded(link)
            if text is not None:
                records[link.name] = text
        try:
            if records:
                await self.redis.hset(self.keys.learned, mapping=records)
        except RedisError as exc:
            log.warning("learned state of %s not saved: %r", ", ".join(records), exc)
            return 0
        self._saved.update(lessons)  # one that cannot be encoded waits for its next lesson
        return len(records)

    def _encoded(self, link: WorkerLink) -> str | None:
        saved = Saved(
            self.fingerprint(link), self.now_ms(), self.node, link.speed_book, link.load_s
        )
        try:
            return encode(saved)
        except ValueError as exc:
            log.warning("learned state of %s not saved: %s", link.name, exc)
            return None

    async def run(self, links: Iterable[WorkerLink]) -> None:
        """Save every `interval_s` what moved, until cancelled."""
        while True:
            tasks.check_cancelled()
            await asyncio.sleep(self.interval_s)
            await self.save(links)
