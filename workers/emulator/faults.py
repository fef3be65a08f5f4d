"""Fault hooks for reliability tests: armed by `--fault KEY=VALUE` or `POST /emulator/faults`.

One-shot faults apply to the next prompt(s) that run (`times`, default 1, counts prompts):
- `crash_at_step` N: the process exits (`os._exit(crash_exit_code)`, default code 1) at step N
  of the prompt: 0 = as it starts, N >= 1 = after the N-th sampler step; a prompt with fewer
  steps exits just before `execution_success`.
- `hang_s` T: at step `hang_at_step` (default 1, same counting) the prompt stops for T seconds:
  no event, no progress, not interruptible; HTTP still answers.
- `stall_ws_s` T: from the prompt's start, no WebSocket frame leaves for T seconds (frames are
  held and delivered afterwards); HTTP answers and history is written as usual.
- `fail_node` ID: the node with this id (or class_type) fails with an `execution_error`
  (`fail_message`, exception type `fail_exception_type`).
- `fail_validation` true: the next `POST /prompt` is refused with a 400
  `prompt_outputs_failed_validation` (counts requests, not prompts run).
Persistent settings: `poison` TEXT makes every prompt whose JSON contains TEXT a poison
workflow: the process exits (as `crash_at_step` 1) whenever one runs, on every run of a worker
started with `--fault poison=TEXT`; `slow_factor` X multiplies every duration; `refuse`
"503" answers every ComfyUI route with 503 (WebSocket upgrades are refused), "close" closes
new TCP connections at once, for `refuse_for_s` seconds (forever when absent). Durations here
are wall-clock seconds, not scaled by `--time-scale`. A null value disarms one key;
`{"clear": true}` all.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class FaultError(ValueError):
    """A fault request that names an unknown key or carries a bad value."""


ONE_SHOT = ("crash_at_step", "hang_s", "stall_ws_s", "fail_node", "fail_validation")
SETTINGS = ("crash_exit_code", "hang_at_step", "fail_message", "fail_exception_type")
REFUSE_MODES = ("503", "close")


@dataclass(frozen=True)
class PromptFaults:
    """The faults one prompt runs with (taken when it starts)."""

    crash_at_step: int | None = None
    crash_exit_code: int = 1
    hang_s: float | None = None
    hang_at_step: int = 1
    stall_ws_s: float | None = None
    fail_node: str | None = None
    fail_message: str = "Emulated failure (fault injection)"
    fail_exception_type: str = "RuntimeError"


def _count(value: Any, minimum: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FaultError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FaultError(f"{name}: expected a number of seconds >= 0, got {value!r}")
    if not math.isfinite(value):
        raise FaultError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def _factor(value: Any, name: str) -> float:
    seconds = _seconds(value, name)
    if seconds <= 0:
        raise FaultError(f"{name}: expected a factor > 0, got {value!r}")
    return seconds


def _text(value: Any, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FaultError(f"{name}: expected a string, got {value!r}")
    return str(value)


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise FaultError(f"{name}: expected true or false, got {value!r}")
    return value


def _refuse(value: Any, name: str) -> str:
    text = _text(value, name)
    if text not in REFUSE_MODES:
        raise FaultError(f"{name}: expected one of {', '.join(REFUSE_MODES)}, got {value!r}")
    return text


_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "crash_at_step": lambda v, n: _count(v, 0, n),
    "crash_exit_code": lambda v, n: _count(v, 0, n),
    "hang_s": _seconds,
    "hang_at_step": lambda v, n: _count(v, 0, n),
    "stall_ws_s": _seconds,
    "fail_node": _text,
    "fail_message": _text,
    "fail_exception_type": _text,
    "fail_validation": _flag,
    "slow_factor": _factor,
    "poison": _text,
    "refuse": _refuse,
    "refuse_for_s": _seconds,
}


def parse_cli(pairs: Iterable[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings (VALUE read as JSON when it parses, else as a string)."""
    body: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise FaultError(f"--fault expects KEY=VALUE, got {pair!r}")
        try:
            body[key] = json.loads(raw)
        except json.JSONDecodeError:
            body[key] = raw
    return body


class Faults:
    """The armed faults of one emulator process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._armed: dict[str, tuple[Any, int]] = {}
        self._settings: dict[str, Any] = {}
        self.slow_factor = 1.0
        self._poison: str | None = None
        self._refuse: str | None = None
        self._refuse_until: float | None = None

    def update(self, body: Mapping[str, Any]) -> None:
        """Apply one request: validate everything first, then change state (all or nothing)."""
        if not isinstance(body, Mapping):
            raise FaultError("expected a JSON object")
        values = dict(body)
        clear = _flag(values.pop("clear", False), "clear")
        times = _count(values.pop("times", 1), 1, "times")
        unknown = sorted(set(values) - set(_CHECKS))
        if unknown:
            raise FaultError(f"unknown fault keys: {', '.join(unknown)}")
        checked = {k: None if v is None else _CHECKS[k](v, k) for k, v in values.items()}
        if clear:
            self.clear()
        for key, value in checked.items():
            self._set(key, value, times)

    def _set(self, key: str, value: Any, times: int) -> None:
        if key in ONE_SHOT:
            self._armed.pop(key, None)
            if value is not None and value is not False:
                self._armed[key] = (value, times)
        elif key in SETTINGS:
            self._settings.pop(key, None)
            if value is not None:
                self._settings[key] = value
        elif key == "slow_factor":
            self.slow_factor = 1.0 if value is None else value
        elif key == "poison":
            self._poison = value
        elif key == "refuse":
            self._refuse = value
        else:
            self._refuse_until = None if value is None else self._clock() + value

    def clear(self) -> None:
        self._armed.clear()
        self._settings.clear()
        self.slow_factor = 1.0
        self._poison = None
        self._refuse = None
        self._refuse_until = None

    def _take(self, key: str) -> Any:
        if key not in self._armed:
            return None
        value, remaining = self._armed[key]
        if remaining <= 1:
            del self._armed[key]
        else:
            self._armed[key] = (value, remaining - 1)
        return value

    def take_for_prompt(self) -> PromptFaults:
        """The one-shot faults for the prompt that starts now (each use counts down)."""
        values = {key: self._take(key) for key in ONE_SHOT if key != "fail_validation"}
        armed = {k: v for k, v in values.items() if v is not None}
        return PromptFaults(**armed, **self._settings)

    def poisons(self, prompt: Any) -> bool:
        """Whether this prompt is poison here (its JSON contains the `poison` text)."""
        return self._poison is not None and self._poison in json.dumps(prompt)

    def take_validation_failure(self) -> bool:
        return bool(self._take("fail_validation"))

    def refusing(self) -> str | None:
        """The refuse mode in force now, or None."""
        expired = self._refuse_until is not None and self._clock() >= self._refuse_until
        if self._refuse is not None and expired:
            self._refuse = self._refuse_until = None
        return self._refuse

    def snapshot(self) -> dict[str, Any]:
        """What `GET /emulator/faults` answers."""
        refuse = self.refusing()
        remaining = None
        if refuse is not None and self._refuse_until is not None:
            remaining = max(0.0, self._refuse_until - self._clock())
        return {
            "armed": {k: {"value": v, "times": n} for k, (v, n) in self._armed.items()},
            "settings": dict(self._settings),
            "slow_factor": self.slow_factor,
            "poison": self._poison,
            "refuse": refuse,
            "refuse_remaining_s": remaining,
        }
