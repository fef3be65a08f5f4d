"""One worker under supervision: its child process, its runs, and what they tell about it.

`ManagedWorker` keeps the facts (phase, the runs that ended, the warm-up timings, the launch
plan, the log) and offers the verbs the supervisor's reconcile loop needs: spawn, bring up
(ready probe, then warm-up), record an exit and decide, with the pure restart policy, what
comes next. It never decides on its own when to act.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from workers.client import ComfyClient
from workers.comfy.launch_args import LaunchPlan
from workers.readiness import NotReady, Pacing, await_until
from workers.supervision.events import Phase
from workers.supervision.launch import WorkerHandle
from workers.supervision.logs import MIB, LogCapture
from workers.supervision.process import ChildProcess, ProcessStartError
from workers.supervision.restart import (
    DEFAULT_SETTINGS,
    Decision,
    ExitRecord,
    Restart,
    RestartSettings,
    describe_exit,
    next_restart,
    prune_history,
)
from workers.warmup.prompts import PROBE_STEPS, WarmupResult

log = logging.getLogger(__name__)

READY_PATH = "/prompt"
# Ask soon after the spawn (an emulator answers in tens of ms), then back off to a quarter second.
BRING_UP_PACING = Pacing(first_s=0.02, growth=2.0, max_s=0.25)

ReadyProbe = Callable[[str], Awaitable[bool]]
Warmer = Callable[[ComfyClient, str, float, int], Awaitable[WarmupResult]]
"""(client, checkpoint, timeout_s, probe_steps) -> the warm-up's timings."""


@dataclass(frozen=True)
class SupervisionSettings:
    """Deadlines and periods of supervision (defaults suit a real ComfyUI)."""

    start_timeout_s: float = 300.0
    warmup_timeout_s: float = 600.0
    warmup_probe_steps: int = PROBE_STEPS
    """Steps of the speed probe after each warm-up (0: no probe)."""
    stop_grace_s: float = 10.0
    orphan_grace_s: float = 60.0
    """How long a worker outlives a crashed gateway, waiting to be adopted by the next one."""
    interval_s: float = 0.25
    restart: RestartSettings = DEFAULT_SETTINGS
    log_max_bytes: int = 10 * MIB
    log_backups: int = 3


@dataclass(frozen=True)
class WorkerStatus:
    """One managed worker as an operator sees it (`/gateway/workers`)."""

    name: str
    phase: Phase
    pid: int | None
    reason: str | None
    restarts: int
    last_exit: str | None
    restart_in_s: float | None
    up_s: float | None
    args: tuple[str, ...]
    arg_reasons: tuple[str, ...]
    preload: tuple[str, ...]
    warmups: tuple[WarmupResult, ...] = field(default=())
    log_path: str | None = None
    adopted: bool = False
    """Its process was left running by an earlier gateway (it may have run prompts)."""

    @property
    def cold(self) -> bool:
        """Ready, started here with nothing warmed up: it has run no prompt."""
        return self.phase is Phase.READY and not self.warmups and not self.adopted


async def http_ready(base_url: str) -> bool:
    """ComfyUI is ready once `GET /prompt` answers 200 (it binds its port only then)."""
    try:
        async with httpx.AsyncClient(timeout=1.0) as client:
            return (await client.get(base_url + READY_PATH)).status_code == 200
    except httpx.HTTPError:
        return False


class ManagedWorker:
    """The supervisor's record of one worker it starts, watches and restarts."""

    def __init__(
        self,
        handle: WorkerHandle,
        process: ChildProcess,
        *,
        client: ComfyClient,
        output: LogCapture,
        plan: LaunchPlan | None,
        preload: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ):
        self.handle = handle
        self.process = process
        self.client = client
        self.output = output
        self.plan = plan
        self.preload = tuple(preload)
        self.clock = clock
        self.phase = Phase.STOPPED
        self.reason: str | None = None
        self.exits: tuple[ExitRecord, ...] = ()
        self.restarts = 0
        self.started_at_s: float | None = None
        self.ready_at_s: float | None = None
        self.restart_at_s: float | None = None
        self.warmups: tuple[WarmupResult, ...] = ()
        self.was_adopted = False
        """Its process was left running by an earlier gateway, which this one adopted."""
        self.bring_up_task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def busy(self) -> bool:
        """A bring-up (ready probe, warm-up) is under way."""
        return self.bring_up_task is not None and not self.bring_up_task.done()

    def spawn(self) -> None:
        """Start a new run (in the event loop's thread, which outlives the child)."""
        if self.started_at_s is not None:
            self.restarts += 1
        self.phase = Phase.STARTING
        self.handle.ready = self.handle.stopping = False
        self.started_at_s = self.clock()
        self.ready_at_s = self.restart_at_s = None
        self.was_adopted = False
        self.output.note(f"starting: {' '.join(self.process.argv)}")
        self.process.start()

    def adopted(self) -> None:
        """Its process was left running by the previous gateway and is ours now."""
        self.phase = Phase.STARTING
        self.handle.ready = self.handle.stopping = False
        self.started_at_s = self.clock()
        self.ready_at_s = self.restart_at_s = None
        self.was_adopted = True
        self.output.note(f"adopted by a new gateway (pid {self.process.pid})")

    async def wait_answering(self, timeout_s: float, probe: ReadyProbe) -> None:
        """Raises ProcessStartError unless it answers within `timeout_s`."""
        await self._wait_ready(timeout_s, probe)

    async def bring_up(
        self, settings: SupervisionSettings, probe: ReadyProbe, warmer: Warmer
    ) -> tuple[WarmupResult, ...]:
        """Wait until it answers, then warm up every preloaded checkpoint, in order.

        Raises ProcessStartError (exited, or not ready by the deadline) or WarmupError.
        """
        await self._wait_ready(settings.start_timeout_s, probe)
        self.phase = Phase.WARMING
        results = []
        for checkpoint in self.preload:
            result = await warmer(
                self.client, checkpoint, settings.warmup_timeout_s, settings.warmup_probe_steps
            )
            log.info("worker %s warmed %s in %.2fs", self.name, checkpoint, result.seconds)
            results.append(result)
        return tuple(results)

    async def _wait_ready(self, timeout_s: float, probe: ReadyProbe) -> None:
        try:
            await await_until(
                lambda: probe(self.handle.url),
                timeout_s,
                gone=self._exit_reason,
                pacing=BRING_UP_PACING,
                clock=self.clock,
            )
        except NotReady as e:
            reason = e.reason if e.exited else f"{e.reason} (start-up deadline)"
            raise ProcessStartError(reason) from e

    def _exit_reason(self) -> str | None:
        if self.process.running:
            return None
        return f"exited before answering ({describe_exit(self.process.returncode)})"

    def mark_ready(self, warmups: tuple[WarmupResult, ...]) -> None:
        self.phase = Phase.READY
        self.ready_at_s = self.clock()
        self.warmups = warmups
        self.reason = self.handle.error = None
        self.handle.ready = True

    def record_exit(self, why: str | None = None) -> ExitRecord:
        """The current run ended (by itself or killed for cause): remember it."""
        now_s = self.clock()
        record = ExitRecord(
            started_at_s=self.started_at_s if self.started_at_s is not None else now_s,
            exited_at_s=now_s,
            became_ready=self.ready_at_s is not None,
            exit_code=self.process.returncode,
        )
        self.exits = (*self.exits, record)
        self.handle.ready = False
        self.reason = why or describe_exit(record.exit_code)
        self.output.note(f"run ended: {self.reason}")
        return record

    def attribute(self, job_id: str) -> None:
        """The gateway blames `job_id` (the prompt that ran) for the run that ended last."""
        if self.exits:
            self.exits = (*self.exits[:-1], dataclasses.replace(self.exits[-1], job=job_id))

    def excuse(self, job_id: str) -> bool:
        """Exits blamed on `job_id` no longer count (it was quarantined as poison); True when
        there were some."""
        found = any(record.job == job_id for record in self.exits)
        self.exits = tuple(
            dataclasses.replace(record, excused=True) if record.job == job_id else record
            for record in self.exits
        )
        return found

    def decide(self, settings: RestartSettings) -> Decision:
        """Ask the restart policy; enter BACKOFF or FAILED accordingly."""
        now_s = self.clock()
        decision = next_restart(self.exits, now_s, settings)
        self.exits = prune_history(self.exits, now_s, settings)
        if isinstance(decision, Restart):
            self.phase, self.restart_at_s = Phase.BACKOFF, decision.restart_at_s
        else:
            self.phase, self.restart_at_s = Phase.FAILED, None
        last_run = self.reason
        self.reason = self.handle.error = f"{decision.reason} (last run: {last_run})"
        return decision

    def fail(self, reason: str) -> None:
        """Refused before any start (e.g. bad launch args): failed until an operator acts."""
        self.phase = Phase.FAILED
        self.reason = self.handle.error = reason
        self.output.note(reason)

    def forget_history(self) -> None:
        """An operator asked for a fresh start: past exits no longer count."""
        self.exits = ()

    def status(self) -> WorkerStatus:
        now_s = self.clock()
        last = self.exits[-1] if self.exits else None
        return WorkerStatus(
            name=self.name,
            phase=self.phase,
            pid=self.process.pid if self.process.running else None,
            reason=self.reason,
            restarts=self.restarts,
            last_exit=describe_exit(last.exit_code) if last else None,
            restart_in_s=max(0.0, self.restart_at_s - now_s) if self.restart_at_s else None,
            up_s=now_s - self.ready_at_s if self.ready_at_s is not None else None,
            args=self.plan.args if self.plan else (),
            arg_reasons=self.plan.reasons if self.plan else (),
            preload=self.preload,
            warmups=self.warmups,
            log_path=str(self.output.path),
            adopted=self.was_adopted,
        )
