"""Preflight: settings that parse but cannot work here are found before anything starts."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.preflight import listen_problem, problems, worker_problem
from gateway.settings import Settings, WorkerConfig, resolve_workers


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_port_in_use_is_named_with_the_way_out(taken_port: int) -> None:
    problem = listen_problem("127.0.0.1", taken_port)
    assert problem is not None
    assert problem.startswith(f"127.0.0.1:{taken_port} is already in use")
    assert "--port N" in problem


def test_a_free_port_and_any_port_pass_and_stay_free() -> None:
    port = free_port()
    assert listen_problem("127.0.0.1", port) is None
    assert listen_problem("127.0.0.1", 0) is None
    with socket.socket() as again:  # the probe let it go
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("999.1.1.1", "cannot listen on '999.1.1.1': not an address or a name"),
        ("192.0.2.1", "cannot listen on 192.0.2.1:"),  # TEST-NET-1: never this machine's
    ],
)
def test_a_host_that_is_not_this_machine_is_refused(host: str, reason: str) -> None:
    problem = listen_problem(host, free_port())
    assert problem is not None and problem.startswith(reason)


def test_workers_that_could_not_start_are_named(tmp_path: Path) -> None:
    checkout = tmp_path / "ComfyUI"
    checkout.mkdir()
    assert worker_problem(WorkerConfig(name="g", gpu=0, comfyui=checkout)) == (
        f"{checkout} is not a ComfyUI checkout (it has no main.py)"
    )
    (checkout / "main.py").write_text("")
    assert worker_problem(WorkerConfig(name="g", gpu=0, comfyui=checkout)) is None
    missing = WorkerConfig(name="g", gpu=0, comfyui=checkout, python=str(tmp_path / "py"))
    assert worker_problem(missing) == f"worker g: no Python at {str(tmp_path / 'py')!r}"
    assert worker_problem(WorkerConfig(name="g", gpu=0)) is not None
    unknown = worker_problem(WorkerConfig(name="s", emulate="a100"))
    assert unknown is not None and "unknown profile 'a100'" in unknown
    assert worker_problem(WorkerConfig(name="s", emulate="h200")) is None
    assert worker_problem(WorkerConfig(name="r", url="http://elsewhere:8188")) is None


def test_every_problem_is_said_once(taken_port: int) -> None:
    settings = Settings(port=taken_port, emulate=3, emulate_profile="a100")
    found = problems(settings, resolve_workers(settings, visible_gpus=()))
    assert len(found) == 2
    assert "already in use" in found[0] and "unknown profile 'a100'" in found[1]
    fine = Settings(port=free_port(), emulate=2)
    assert problems(fine, resolve_workers(fine, visible_gpus=())) == []
