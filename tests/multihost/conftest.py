"""Several gateway nodes on one Redis: real `comfy-gateway serve` processes on loopback, each
with its own data dir and one emulated worker, on small time scales."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from tests.faults.farms import FAST, GatewayProcess, gateway_process

NODE: dict[str, Any] = {
    **FAST,
    "time_scale": 0.05,
    "lease_s": 2.0,
    "node_ttl_s": 1.5,
    "policy": "affinity",
}


def node_file(path: Path, worker: str, checkpoints: Sequence[str], **extra: Any) -> Path:
    """A farm file of one emulated worker with these checkpoints."""
    given = {**NODE, **extra}
    lines = [f"{k} = {_toml(v)}" for k, v in given.items() if not isinstance(v, dict)]
    lines += ["[restart]", *(f"{k} = {_toml(v)}" for k, v in NODE["restart"].items())]
    lines += ["[[workers]]", f'name = "{worker}"', 'emulate = "rtx4070ti"']
    lines += [f"checkpoints = {_toml(list(checkpoints))}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


@contextmanager
def nodes(
    redis_url: str, root: Path, workers: dict[str, Sequence[str]], **extra: Any
) -> Iterator[list[GatewayProcess]]:
    """One gateway process per worker (name -> its checkpoints), all on `redis_url`."""
    with ExitStack() as stack:
        out = []
        for name, checkpoints in workers.items():
            config = node_file(root / name / "farm.toml", name, checkpoints, **extra)
            out.append(stack.enter_context(gateway_process(config, redis_url, root / name)))
        yield out
