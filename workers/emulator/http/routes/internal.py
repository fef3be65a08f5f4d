"""ComfyUI's `/internal` sub-application (the frontend's own routes; never under `/api`).

- `GET /internal/logs`: the recent log as one JSON string ("<ISO time> - <line>\n" each).
- `GET /internal/logs/raw`: `{"entries": [{"t", "m"}], "size": {"cols", "rows"}}`.
- `GET /internal/folder_paths`: every model folder name with its paths.
- `GET /internal/files/{output|input|temp}`: the folder's file names, newest first; another
  name is 400 `{"error": "Invalid directory type"}`.
"""

from __future__ import annotations

import os
import shutil

from starlette.requests import Request
from starlette.responses import Response

from workers.comfy.modelfolders import folder_paths
from workers.emulator.http.responses import json_response
from workers.emulator.http.routes.common import RouteTable, emulator_of

# What ComfyUI reports when it cannot ask a terminal.
FALLBACK_TERMINAL = (80, 24)


async def logs(request: Request) -> Response:
    return json_response(emulator_of(request).logs.text())


async def raw_logs(request: Request) -> Response:
    cols, rows = shutil.get_terminal_size(FALLBACK_TERMINAL)
    entries = list(emulator_of(request).logs.entries)
    return json_response({"entries": entries, "size": {"cols": cols, "rows": rows}})


async def paths(request: Request) -> Response:
    emulator = emulator_of(request)
    return json_response(folder_paths(emulator.config.base_path, emulator.dirs.output))


def newest_first(directory: str) -> list[str]:
    """The names of the files directly in `directory`, most recently modified first."""
    with os.scandir(directory) as entries:
        found = [entry for entry in entries if entry.is_file()]
    found.sort(key=lambda entry: -entry.stat().st_mtime)
    return [entry.name for entry in found]


async def files(request: Request) -> Response:
    directory = emulator_of(request).dirs.by_type(request.path_params["directory_type"])
    if directory is None:
        return json_response({"error": "Invalid directory type"}, 400)
    return json_response(newest_first(directory))


ROUTES: RouteTable = [
    ("GET", "/internal/logs", logs),
    ("GET", "/internal/logs/raw", raw_logs),
    ("GET", "/internal/folder_paths", paths),
    ("GET", "/internal/files/{directory_type}", files),
]
