"""Serving the app: the start-up delay, ComfyUI's log lines, sockets, and the `close` refusal.

As ComfyUI 0.3.64, the port opens only when the instance is ready: the profile's start-up
time (x time scale) passes before the sockets are bound, so a readiness probe sees connection
refused until then, and the "To see the GUI go to" line marks readiness.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

from workers.emulator.config import MIB, EmulatorConfig
from workers.emulator.http.systeminfo import host_memory

log = logging.getLogger(__name__)

COMFYUI_VERSION = "0.3.64"
# aiohttp's Server header as ComfyUI sends it (recorded).
SERVER_HEADER = f"Python/{sys.version_info.major}.{sys.version_info.minor} aiohttp/3.14.5"


def refusing_protocol(refusing: Callable[[], str | None]) -> type[H11Protocol]:
    """uvicorn's HTTP protocol, closing new connections at once while `refusing()` is "close"."""

    class RefusingProtocol(H11Protocol):
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if refusing() == "close":
                self._refused = True
                transport.close()
                return
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            if not self._refused:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._refused:
                super().data_received(data)

    return RefusingProtocol


def bind(hosts: Sequence[str], port: int) -> list[socket.socket]:
    """Listening-ready sockets for every address (raises OSError, e.g. port in use)."""
    sockets: list[socket.socket] = []
    for host in hosts:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # As aiohttp does for ComfyUI: without it a keep-alive answer whose body leaves in a
        # second write waits ~40 ms for the client's delayed ACK. Accepted sockets inherit it.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            for opened in sockets:
                opened.close()
            raise
        sock.set_inheritable(True)
        sockets.append(sock)
    return sockets


def startup_lines(config: EmulatorConfig) -> list[str]:
    """ComfyUI's start-up log, for this emulated card (and one line saying what it is)."""
    profile, flags = config.profile, config.flags
    total_mb = int(profile.vram_total_mib)
    ram_mb = host_memory()[0] // MIB
    state = (
        "DISABLED"
        if flags.cpu
        else {"low": "LOW_VRAM", "no": "NO_VRAM"}.get(
            flags.vram_mode.value,
            "HIGH_VRAM" if flags.vram_mode.value in ("high", "gpu_only") else "NORMAL_VRAM",
        )
    )
    return [
        f"Emulated ComfyUI (comfy-gateway): profile {profile.name}, time scale {config.time_scale}",
        "Checkpoint files will always be loaded safely.",
        f"Total VRAM {ram_mb if flags.cpu else total_mb} MB, total RAM {ram_mb} MB",
        f"Set vram state to: {state}",
        f"Device: {'cpu' if flags.cpu else profile.device_name}",
        f"Python version: {sys.version}",
        f"ComfyUI version: {COMFYUI_VERSION}",
        "[Prompt Server] web root: (none)",
    ]


def _address(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(app: Starlette, config: EmulatorConfig, *, print_server: bool = True) -> int:
    """Wait the start-up time, bind, serve until SIGINT/SIGTERM; the exit status."""
    for line in startup_lines(config):
        log.info(line)
    await asyncio.sleep(config.startup_delay_s)
    try:
        sockets = bind(config.listen, config.port)
    except OSError as exc:
        log.error("%s: %s", type(exc).__name__, exc)
        return 1

    def ready() -> None:
        if print_server:
            log.info("Starting server\n")
            for host in config.listen:
                log.info("To see the GUI go to: http://%s:%s", _address(host), config.port)

    server = _Server(_uvicorn_config(app), ready)
    await server.serve(sockets=sockets)
    return 0 if server.started else 1


class _Server(uvicorn.Server):
    """uvicorn's server, telling when its sockets accept connections."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()


def _uvicorn_config(app: Starlette) -> uvicorn.Config:
    emulator: Any = app.state.emulator
    return uvicorn.Config(
        app,
        http=refusing_protocol(emulator.faults.refusing),
        ws="websockets-sansio",
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        headers=[("Server", SERVER_HEADER)],
        timeout_graceful_shutdown=3,
        timeout_keep_alive=75,  # aiohttp's keep-alive, so clients reuse connections alike
    )
