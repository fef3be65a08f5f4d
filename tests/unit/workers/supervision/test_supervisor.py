"""The supervisor's reconcile loop with fake children, a fake clock and scripted readiness:
which lifecycle events each history of starts and exits produces."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from workers.client import ComfyClient
from workers.supervision.events import LifecycleKind, Phase, WorkerEvent
from workers.supervision.launch import FarmLayout, WorkerSpec
from workers.supervision.process import ChildProcess
from workers.supervision.restart import RestartSettings
from workers.supervision.supervisor import Seams, Supervisor
from workers.supervision.worker import SupervisionSettings
from workers.warmup.prompts import Phase as WarmupPhase
from workers.warmup.prompts import WarmupResult
from workers.warmup.run import WarmupError

K = LifecycleKind
_pids = itertools.count(1000)


class FakeProcess(ChildProcess):
    """A child that starts at once, exits when told, and dies when terminated."""

    def __init__(self, argv: Sequence[str], **_: Any):
        super().__init__(argv)
        self.fake_pid: int | None = None
        self.code: int | None = None
        self.starts = 0
        self.exit_at_start: int | None = None

    @property
    def pid(self) -> int | None:
        return self.fake_pid

    @property
    def returncode(self) -> int | None:
        return self.code

    @property
    def running(self) -> bool:
        return self.fake_pid is not None and self.code is None

    def start(self) -> None:
        self.starts += 1
        self.fake_pid, self.code = next(_pids), self.exit_at_start

    def exit(self, code: int) -> None:
        self.code = code

    def terminate(self, grace_s: float = 5.0) -> int | None:
        if self.running:
            self.code = -15
        return self.code

    def kill(self) -> None:
        if self.running:
            self.code = -9


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class Farm:
    """A supervisor of fake children, and every event it emitted."""

    def __init__(self, tmp_path: Path, specs: list[WorkerSpec], **settings: Any):
        self.clock = Clock()
        self.events: list[WorkerEvent] = []
        self.processes: dict[str, FakeProcess] = {}
        self.warm_fails: set[str] = set()
        self.warmed: list[tuple[str, float, int]] = []
        restart = RestartSettings(
            backoff_initial_s=1, backoff_max_s=8, max_start_failures=2, flap_exits=3
        )
        self.supervisor = Supervisor(
            specs,
            FarmLayout(tmp_path / "w", tmp_path / "in"),
            environ={},
            settings=SupervisionSettings(restart=restart, **settings),
            seams=Seams(spawn=self.spawn, port_for=lambda: 1, probe=self.probe, warmer=self.warm),
            clock=self.clock,
        )
        self.supervisor.subscribe(self.record)

    def spawn(self, argv: Sequence[str], **kwargs: Any) -> FakeProcess:
        process = FakeProcess(argv, **kwargs)
        self.processes[str(kwargs["output"].path.parent.name)] = process
        return process

    async def probe(self, url: str) -> bool:
        self.clock.now_s += 0.1
        return True

    async def warm(
        self, client: ComfyClient, checkpoint: str, timeout_s: float, probe_steps: int
    ) -> WarmupResult:
        self.warmed.append((checkpoint, timeout_s, probe_steps))
        if checkpoint in self.warm_fails:
            raise WarmupError(f"warm-up of {checkpoint} failed: no such file")
        return WarmupResult(checkpoint, 2.0, None, {WarmupPhase.LOAD: 1.5})

    async def record(self, event: WorkerEvent) -> None:
        self.events.append(event)

    def kinds(self, name: str) -> list[LifecycleKind]:
        return [event.kind for event in self.events if event.worker == name]

    async def settle(self) -> None:
        """Let launched bring-ups finish (they run as tasks)."""
        for worker in self.supervisor.workers.values():
            if worker.bring_up_task is not None:
                await worker.bring_up_task

    async def tick(self, advance_s: float = 0.0) -> None:
        self.clock.now_s += advance_s
        await self.supervisor.reconcile()
        await self.settle()


MakeFarm = Callable[..., Farm]


@pytest.fixture
async def make_farm(tmp_path: Path) -> AsyncIterator[MakeFarm]:
    made: list[Farm] = []

    def make(specs: list[WorkerSpec], **settings: Any) -> Farm:
        made.append(Farm(tmp_path, specs, **settings))
        return made[-1]

    yield make
    for farm in made:
        await farm.supervisor.stop_all()


def spec(name: str, **fields: Any) -> WorkerSpec:
    return WorkerSpec(name=name, emulate="rtx4070ti", **fields)


async def test_a_crash_is_restarted_after_its_backoff_and_warmed_again(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a", preload=("x.safetensors",))])
    await farm.supervisor.start_all()
    ready = farm.events[-1]
    assert ready.kind is K.READY and ready.warmups[0].load_s == 1.5
    farm.processes["a"].exit(1)
    await farm.tick()
    assert farm.kinds("a")[-2:] == [K.EXITED, K.RESTART_SCHEDULED]
    assert farm.events[-2].failure and farm.events[-1].delay_s == 1
    await farm.tick(0.5)
    assert farm.processes["a"].starts == 1, "restarted before its backoff"
    await farm.tick(0.6)
    assert farm.kinds("a")[-2:] == [K.SPAWNED, K.READY]
    status = farm.supervisor.status("a")
    assert status is not None and (status.phase, status.restarts) == (Phase.READY, 1)


async def test_a_worker_that_never_starts_is_given_up_with_its_reason(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a")])
    original = farm.spawn

    def exiting(argv: Sequence[str], **kwargs: Any) -> FakeProcess:
        process = original(argv, **kwargs)
        process.exit_at_start = 2
        return process

    farm.supervisor.spawn = exiting
    await farm.supervisor.start_all()
    await farm.tick(1.0)
    assert farm.kinds("a") == [
        K.SPAWNED, K.EXITED, K.RESTART_SCHEDULED, K.SPAWNED, K.EXITED, K.GAVE_UP,
    ]  # fmt: skip
    status = farm.supervisor.status("a")
    assert status is not None and status.phase is Phase.FAILED
    assert status.reason is not None and status.reason.startswith("broken at start")
    assert "exited before answering (exit code 2)" in status.reason
    await farm.tick(60.0)
    assert farm.processes["a"].starts == 2, "restarted after giving up"


async def test_a_failed_warm_up_is_a_failed_start(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a", preload=("missing.safetensors",))])
    farm.warm_fails.add("missing.safetensors")
    await farm.supervisor.start_all()
    assert farm.kinds("a") == [K.SPAWNED, K.EXITED, K.RESTART_SCHEDULED]
    assert "no such file" in farm.events[1].reason
    assert not farm.supervisor.handles[0].ready


async def test_the_warm_up_gets_its_timeout_and_probe_steps_from_the_settings(
    make_farm: MakeFarm,
) -> None:
    farm = make_farm(
        [spec("a", preload=("x.safetensors", "y.safetensors"))],
        warmup_timeout_s=42.0,
        warmup_probe_steps=0,
    )
    await farm.supervisor.start_all()
    assert farm.warmed == [("x.safetensors", 42.0, 0), ("y.safetensors", 42.0, 0)]


async def test_not_answering_by_the_deadline_is_a_failed_start(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a")], start_timeout_s=0.35)

    async def never(url: str) -> bool:
        farm.clock.now_s += 0.1
        return False

    farm.supervisor.probe = never
    await farm.supervisor.start_all()
    assert "not ready after 0.35 s" in farm.events[1].reason
    assert farm.processes["a"].returncode == -9


async def test_flapping_after_ready_is_given_up(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a")])
    await farm.supervisor.start_all()
    for _ in range(3):
        farm.processes["a"].exit(-9)
        await farm.tick()
        await farm.tick(10.0)
    status = farm.supervisor.status("a")
    assert status is not None and status.phase is Phase.FAILED
    assert status.reason is not None and status.reason.startswith("flapping: 3 exits")
    assert farm.kinds("a")[-1] is K.GAVE_UP
    assert farm.supervisor.resume("a")
    await farm.settle()
    assert farm.kinds("a")[-1] is K.READY


async def test_an_operator_restart_is_not_a_failure_and_clears_the_history(
    make_farm: MakeFarm,
) -> None:
    farm = make_farm([spec("a")])
    await farm.supervisor.start_all()
    first_pid = farm.processes["a"].pid
    await farm.supervisor.restart("a", "asked", failure=False)
    await farm.settle()
    exited = [event for event in farm.events if event.kind is K.EXITED]
    assert len(exited) == 1 and not exited[0].failure and exited[0].reason == "asked"
    assert farm.kinds("a")[-2:] == [K.SPAWNED, K.READY]
    assert farm.processes["a"].pid != first_pid
    assert farm.supervisor.workers["a"].exits == ()


async def test_conflicting_launch_args_are_refused_before_any_start(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a", args=("--lowvram", "--highvram")), spec("b")])
    await farm.supervisor.start_all()
    status = farm.supervisor.status("a")
    assert status is not None and status.phase is Phase.FAILED
    assert status.reason is not None and "launch args refused" in status.reason
    assert "--lowvram" in status.reason and "--highvram" in status.reason
    assert farm.processes["a"].starts == 0
    assert farm.kinds("b") == [K.SPAWNED, K.READY]


@pytest.mark.parametrize(
    ("profile", "added"),
    [("h200", ("--cache-lru", "22")), ("rtx4070ti", ())],
)
async def test_default_args_follow_the_cards_vram(
    make_farm: MakeFarm, profile: str, added: tuple[str, ...]
) -> None:
    farm = make_farm([WorkerSpec(name="a", emulate=profile, args=("--fp16-vae",))])
    await farm.supervisor.start_all()
    status = farm.supervisor.status("a")
    assert status is not None and status.args == ("--fp16-vae", *added)
    assert farm.processes["a"].argv[-len(status.args) :] == list(status.args)
    assert status.arg_reasons[0].startswith("cache:")


async def test_stop_all_ends_every_child_and_nothing_restarts(make_farm: MakeFarm) -> None:
    farm = make_farm([spec("a"), spec("b")])
    await farm.supervisor.start_all()
    await farm.supervisor.stop_all()
    assert all(p.returncode == -15 for p in farm.processes.values())
    assert farm.kinds("a")[-1] is K.STOPPED
    await farm.tick(60.0)
    assert all(p.starts == 1 for p in farm.processes.values())
