"""Emulator-only routes, outside ComfyUI's paths (never aliased under /api).

- `GET /emulator/faults`: the armed faults (`faults.Faults.snapshot`).
- `POST /emulator/faults` with a JSON object (see `workers.emulator.faults`): arm or disarm;
  answers the new snapshot, or 400 `{"error": "..."}` for an unknown key or a bad value.
- `DELETE /emulator/faults`: disarm everything and end a WebSocket stall in progress.
- `GET /emulator/state`: queue, models, cache and counters (`state`).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from workers.emulator.faults import FaultError
from workers.emulator.http.responses import json_response
from workers.emulator.http.routes.common import RouteTable, emulator_of, read_json
from workers.emulator.http.state import Emulator


async def get_faults(request: Request) -> Response:
    return json_response(emulator_of(request).faults.snapshot())


async def post_faults(request: Request) -> Response:
    emulator = emulator_of(request)
    try:
        body = await read_json(request)
        emulator.faults.update(body)
    except (FaultError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        return json_response({"error": str(exc)}, 400)
    if isinstance(body, dict) and body.get("clear") is True:
        emulator.hub.end_stall()
    return json_response(emulator.faults.snapshot())


async def delete_faults(request: Request) -> Response:
    emulator = emulator_of(request)
    emulator.faults.clear()
    emulator.hub.end_stall()
    return json_response(emulator.faults.snapshot())


def state(emulator: Emulator) -> dict[str, Any]:
    """What tests and benchmarks may want to see inside the instance."""
    engine, queue, config = emulator.engine, emulator.queue, emulator.config
    instance = engine.instance
    return {
        "profile": config.profile.name,
        "launch_flags": config.flags.args(),
        "time_scale": config.time_scale,
        "checkpoints": list(emulator.catalog.checkpoints),
        "model_files": {f: list(emulator.catalog.files(f)) for f in emulator.config.model_files},
        "queue": {
            "running": queue.running_ids(),
            "pending": [item[1] for item in queue.pending()],
            "next_number": queue.number,
        },
        "client_id": engine.client_id,
        "last_node_id": engine.last_node_id,
        "interrupt_flag": engine.interrupted,
        "models": {
            "resident": list(engine.residency.resident()),
            "cached": list(engine.residency.cached()),
            "vram_used_mib": engine.vram_used_mib(),
            "vram_total_mib": config.profile.vram_total_mib,
        },
        "node_cache": {"mode": config.flags.cache_mode.value, "entries": len(engine.outputs)},
        "counters": {
            "prompts_started": engine.counts.started,
            "prompts_succeeded": engine.counts.succeeded,
            "prompts_failed": engine.counts.failed,
            "nodes_executed": instance.nodes_executed,
            "steps_sampled": instance.steps_sampled,
            "images_saved": instance.images_saved,
            "loads": dict(instance.loads),
        },
        "first_job_pending": instance.first_job_pending,
        "sockets": list(emulator.hub.sockets),
        "ws_stalled": emulator.hub.stalled,
    }


async def get_state(request: Request) -> Response:
    return json_response(state(emulator_of(request)))


ROUTES: RouteTable = [
    ("GET", "/emulator/faults", get_faults),
    ("POST", "/emulator/faults", post_faults),
    ("DELETE", "/emulator/faults", delete_faults),
    ("GET", "/emulator/state", get_state),
]
