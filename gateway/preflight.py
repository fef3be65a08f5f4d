"""What `serve` checks before it starts anything: settings that parse but cannot work here.

Each problem is found in a moment and said in one line, before Redis and the workers start
(a worker that cannot start is otherwise reported only once its start has failed, and a port
in use only after every worker came up). `problems` never raises.
"""

from __future__ import annotations

import errno
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from gateway.settings import Settings, WorkerConfig
from workers.supervision.supervisor import SHIPPED_PROFILES


def problems(settings: Settings, workers: Sequence[WorkerConfig]) -> list[str]:
    """Every reason these settings and this farm cannot serve, each once, in a stable order;
    empty when there is none."""
    found = [listen_problem(settings.host, settings.port)]
    found += [worker_problem(worker) for worker in workers]
    return list(dict.fromkeys(problem for problem in found if problem))


def listen_problem(host: str, port: int) -> str | None:
    """Why the gateway could not listen on `host`:`port`, found by binding it for a moment
    (as the server will, address reuse on: a closed connection's wait does not count)."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        return f"cannot listen on {host!r}: not an address or a name this host resolves ({exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return _bind_problem(host, port, exc)
    return None


def _bind_problem(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where} is already in use (a ComfyUI or another gateway?): stop it, or pass"
            " --port N (COMFY_GATEWAY_PORT)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: ports below 1024 need privileges; pass --port N"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def worker_problem(worker: WorkerConfig) -> str | None:
    """Why this worker could not start: an emulated card profile that does not load, a
    ComfyUI folder with no `main.py`, a Python that is not there. None for a worker the
    gateway does not start (`url`)."""
    if worker.url is not None:
        return None
    if worker.emulate is not None:
        return _profile_problem(worker.emulate)
    if worker.comfyui is None:
        return f"worker {worker.name}: no ComfyUI to run (comfyui = PATH, or emulate = PROFILE)"
    if not (worker.comfyui / "main.py").is_file():
        return f"{worker.comfyui} is not a ComfyUI checkout (it has no main.py)"
    if worker.python is not None and not _runs(worker.python):
        return f"worker {worker.name}: no Python at {worker.python!r}"
    return None


def _profile_problem(profile: str) -> str | None:
    """A profile neither shipped nor a JSON file; what is in a file the emulator checks as it
    starts (read as data here: production code never imports the emulator)."""
    path = Path(profile)
    if (SHIPPED_PROFILES / f"{profile}.json").is_file() or (
        path.suffix == ".json" and path.is_file()
    ):
        return None
    known = ", ".join(sorted(shipped.stem for shipped in SHIPPED_PROFILES.glob("*.json")))
    return f"emulated card: unknown profile {profile!r}: not one of {known}, nor a JSON file"


def _runs(python: str) -> bool:
    return Path(python).is_file() or shutil.which(python) is not None
