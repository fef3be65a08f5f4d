"""A worker as the placement policy sees it, written for the other nodes and read back.

A node publishes a `WorkerView` of each of its accepting workers with every heartbeat; the
other nodes read it back as a lane they may not assign to but that counts in their policy's
view. Pure functions over plain JSON values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from gateway.scheduler.snapshot import WorkerView

_SETS = ("estimated", "estimated_load")
_MAPS = ("speed", "load_s", "fixed_s")


def lane_record(view: WorkerView) -> dict[str, Any]:
    """The view as JSON values."""
    record: dict[str, Any] = {f.name: getattr(view, f.name) for f in fields(view)}
    for name in _SETS:
        record[name] = sorted(record[name])
    for name in _MAPS:
        record[name] = dict(record[name])
    record["resident"] = list(view.resident)
    record["queued"] = [sorted(keys) for keys in view.queued]
    return record


def lane_of(record: Mapping[str, Any], age_s: float) -> WorkerView:
    """The view published `age_s` ago, as it stands now: what it held then is `age_s` nearer
    done. Raises KeyError or TypeError on a record that is no lane."""
    known = {f.name for f in fields(WorkerView)}
    values = {name: value for name, value in record.items() if name in known}
    for name in _SETS:
        values[name] = frozenset(values.get(name, ()))
    for name in _MAPS:
        values[name] = dict(values.get(name, {}))
    values["resident"] = tuple(values.get("resident", ()))
    values["queued"] = tuple(frozenset(keys) for keys in values.get("queued", ()))
    view = WorkerView(**values)
    return replace(view, outstanding_s=max(view.outstanding_s - max(age_s, 0.0), 0.0))
