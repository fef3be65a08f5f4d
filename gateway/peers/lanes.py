"""A worker as the placement policy sees it, written for the other nodes and read back.

A node publishes a `WorkerView` of each of its accepting workers with every heartbeat; the
other nodes read it back as a lane they may not assign to but that counts in their policy's
view. Pure functions over plain JSON values.

What this guarantees (tests/unit/gateway/peers/test_lanes.py): every node runs the same late-binding
policy on the same queue (Redis) and the same lanes in the same order (`farm_lanes`), its
own fresh, the others' as of their last heartbeat. A node claims only what the policy gives
its own lanes and leaves a job the policy gives another node's lane, which that node, making
the same decision, claims. So a node never takes a job that a worker elsewhere would finish
sooner by the policy's measure, no job is claimed twice (claims are atomic in any case), and
a job left to another node waits at most until the views agree again: one heartbeat after
the lanes stop changing, or the lapse of a node that died (its lanes then drop out).
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


def farm_lanes(
    local: tuple[WorkerView, ...], remote: tuple[WorkerView, ...]
) -> tuple[WorkerView, ...]:
    """This node's lanes and the other nodes', as the policy gets them: by name whenever the
    farm has other nodes, so every node's policy breaks ties alike (alone, in config order)."""
    if not remote:
        return local
    return tuple(sorted(local + remote, key=lambda view: view.name))
