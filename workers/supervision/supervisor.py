"""The supervisor: one child per worker, started, warmed up, watched, healed, stopped.

Each managed worker (`workers.supervision.worker.ManagedWorker`) is started with the command line of
`workers.supervision.launch`, warmed up, watched by a reconcile loop, restarted as the pure restart
policy
(`workers.supervision.restart`) says, and stopped with SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workers
from workers.client import ComfyClient
from workers.comfy.launch_args import FlagError, LaunchPlan, plan_launch
from workers.supervision.events import EventSink, LifecycleKind, Phase, WorkerEvent
from workers.supervision.launch import (
    FarmLayout,
    WorkerHandle,
    WorkerSpec,
    comfyui_argv,
    emulator_argv,
    worker_env,
)
from workers.supervision.logs import LogCapture
from workers.supervision.ports import free_port
from workers.supervision.process import (
    ChildProcess,
    Keeping,
    KeptProcess,
    ProcessStartError,
    recorded_port,
    touch_lease,
)
from workers.supervision.restart import Restart
from workers.supervision.worker import (
    ManagedWorker,
    ReadyProbe,
    SupervisionSettings,
    Warmer,
    WorkerStatus,
    http_ready,
)
from workers.warmup.prompts import WarmupResult
from workers.warmup.run import WarmupError, warm_up

log = logging.getLogger(__name__)

Spawn = Callable[..., ChildProcess]
VramOf = Callable[[WorkerSpec], float | None]
LEASE_TOUCH_S = 0.5
"""How often the lease is touched; keepers wait `orphan_grace_s` past the last touch."""
ADOPT_TIMEOUT_S = 10.0
"""How long an adopted worker has to answer before it is replaced by a fresh one."""


SHIPPED_PROFILES = Path(workers.__file__).parent / "emulator" / "profiles"
"""The card profiles shipped with the emulator (JSON; see the README beside them)."""


def emulated_vram(spec: WorkerSpec) -> float | None:
    """The VRAM an emulated worker's profile claims (None for real workers: ask NVML, and for
    a profile that cannot be read: the emulator refuses it at start)."""
    if spec.emulate is None:
        return None
    # The profile is read as data: production code never imports the emulator.
    shipped = SHIPPED_PROFILES / f"{spec.emulate}.json"
    path = shipped if shipped.is_file() else Path(spec.emulate)
    try:
        vram_mib = json.loads(path.read_text(encoding="utf-8"))["vram_total_mib"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None
    return float(vram_mib) if isinstance(vram_mib, int | float) else None


async def _warm(
    client: ComfyClient, checkpoint: str, timeout_s: float, probe_steps: int
) -> WarmupResult:
    return await warm_up(client, checkpoint, timeout_s=timeout_s, probe_steps=probe_steps)


@dataclass(frozen=True)
class Seams:
    """How the supervisor starts and reaches a child, replaceable as one (tests pass fakes):
    `spawn` makes the process (None: under a keeper), `port_for` picks its port, `probe`
    asks whether it answers, `warmer` warms one checkpoint."""

    spawn: Spawn | None = None
    port_for: Callable[[], int] = free_port
    probe: ReadyProbe = http_ready
    warmer: Warmer = _warm


class Lease:
    """Touches the keepers' lease file from a thread of its own, so that a busy event loop
    (a start-up, a burst) never looks like a dead gateway to the keepers."""

    def __init__(self, path: Path, every_s: float = LEASE_TOUCH_S):
        self.path = path
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        touch_lease(self.path)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="worker-lease", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(OSError):
                touch_lease(self.path)


class Supervisor:
    """Runs one child per managed worker: start, warm up, watch, restart, stop.

    `run()` is the reconcile loop: every `settings.interval_s` it compares each worker's phase
    with its process. A ready worker whose process ended is recorded and handed to the restart
    policy; a worker in backoff whose time has come is started again. Lifecycle events go to
    every subscribed sink, awaited in order. Workers with a `url` are not started or watched.

    Workers run under keepers (`workers.supervision.keeper`): they outlive a crash of the gateway by
    `settings.orphan_grace_s` while the supervisor no longer touches the lease, and a new
    supervisor on the same folders adopts each one still running its command line, without
    a new start or warm-up (the gateway's recovery then adopts the jobs it holds).
    """

    def __init__(
        self,
        specs: Sequence[WorkerSpec],
        layout: FarmLayout,
        *,
        environ: Mapping[str, str],
        settings: SupervisionSettings | None = None,
        seams: Seams = Seams(),
        vram_of: VramOf = emulated_vram,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.specs = list(specs)
        self.layout = layout
        self.environ = dict(environ)
        self.settings = settings or SupervisionSettings()
        self.spawn = seams.spawn or self._kept
        self.port_for = seams.port_for
        self.vram_of = vram_of
        self.probe = seams.probe
        self.warmer = seams.warmer
        self.clock = clock
        self.handles: list[WorkerHandle] = []
        self.workers: dict[str, ManagedWorker] = {}
        self._sinks: list[EventSink] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0
        """Reconcile rounds run so far: what a test waits on to know exits were looked at."""
        self._lease = Lease(self.lease_path)
        self._stopped = False

    # -- the operator's and the gateway's verbs ----------------------------------------------

    def subscribe(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def unsubscribe(self, sink: EventSink) -> None:
        with contextlib.suppress(ValueError):
            self._sinks.remove(sink)

    def status(self, name: str) -> WorkerStatus | None:
        worker = self.workers.get(name)
        return worker.status() if worker else None

    def log_tail(self, name: str) -> list[str]:
        worker = self.workers.get(name)
        return worker.output.tail() if worker else []

    async def start_all(self) -> list[WorkerHandle]:
        """Start every worker; returns once each is ready, refused, or past its first try."""
        self._make_dirs()
        self._lease.start()
        self.handles = [self._build(spec) for spec in self.specs]
        for worker in self.workers.values():
            if worker.phase is Phase.FAILED:
                continue
            if isinstance(worker.process, KeptProcess) and worker.process.adopt():
                self._start_task(worker, self._adopt(worker))
            else:
                self._launch(worker)
        starting = [w.bring_up_task for w in self.workers.values() if w.bring_up_task]
        await asyncio.gather(*starting)
        return self.handles

    def start(self) -> None:
        """Run the reconcile loop in the background (after `start_all`)."""
        if self._task is None and not self._stopped:
            self._task = asyncio.create_task(self.run(), name="supervisor")

    @property
    def lease_path(self) -> Path:
        """Touched while this supervisor runs: the keepers' sign of a living gateway."""
        return self.layout.root / "gateway.lease"

    async def run(self) -> None:
        while not self._stopped:
            try:
                await self.reconcile()
            except Exception:
                log.exception("supervision round failed")
            self.rounds += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.interval_s)
            self._wake.clear()

    async def restart(self, name: str, reason: str, *, failure: bool) -> None:
        """End this worker's run and start another. `failure` (a hang): the run counts for
        the restart policy, which may back off or give up. Otherwise (an operator asked) past
        exits are forgotten and the new run starts at once. Raises KeyError for no such
        managed worker."""
        worker = self.workers[name]
        log.warning("worker %s: restarting (%s)", name, reason)
        await self._stop_run(worker, self.settings.stop_grace_s)
        worker.record_exit(reason)
        await self._emit(worker, LifecycleKind.EXITED, reason=reason, failure=failure)
        if failure:
            await self._decide(worker)
        else:
            worker.forget_history()
            self._launch(worker)

    async def relaunch(self, name: str, spec: WorkerSpec, reason: str) -> None:
        """End this worker's run and start it again as `spec` (other launch args or group;
        the same name, port and folders), with a clean history. Raises KeyError for no such
        managed worker, ValueError for a spec of another name."""
        worker = self.workers[name]
        if spec.name != name:
            raise ValueError(f"a relaunch of {name} cannot rename it to {spec.name}")
        log.warning("worker %s: relaunching with %s (%s)", name, " ".join(spec.args), reason)
        await self._stop_run(worker, self.settings.stop_grace_s)
        worker.record_exit(reason)
        await self._emit(worker, LifecycleKind.EXITED, reason=reason, failure=False)
        port = int(worker.handle.url.rsplit(":", 1)[1])
        process, plan, refusal = self._process(spec, port, worker.output)
        worker.handle.spec = spec
        worker.handle.process = worker.process = process
        worker.plan = plan
        self.specs = [spec if s.name == name else s for s in self.specs]
        worker.forget_history()
        if refusal is not None:
            worker.fail(refusal)
            return
        self._launch(worker)

    def resume(self, name: str) -> bool:
        """Start a failed or stopped worker again, with a clean history; False if it runs.
        Raises KeyError for no such managed worker."""
        worker = self.workers[name]
        if worker.phase not in (Phase.FAILED, Phase.STOPPED) or worker.busy:
            return False
        log.info("worker %s: resumed by an operator", name)
        worker.forget_history()
        self._launch(worker)
        return True

    def attribute(self, name: str, job_id: str) -> None:
        """Blame the last exit of worker `name` on prompt `job_id` (it was running it). No
        effect for an unknown worker."""
        worker = self.workers.get(name)
        if worker is not None:
            worker.attribute(job_id)

    def excuse(self, job_id: str) -> list[str]:
        """Prompt `job_id` is poison (quarantined): the exits blamed on it count for no
        worker's restart policy, so no worker is marked flapping for them. Returns the
        workers that had such exits."""
        excused = [worker.name for worker in self.workers.values() if worker.excuse(job_id)]
        if excused:
            log.warning("prompt %s quarantined: exits of %s not counted", job_id, excused)
        return excused

    async def stop_all(self, grace_s: float | None = None) -> None:
        """Stop the loop, then every child: SIGTERM, SIGKILL after `grace_s`. Idempotent."""
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        self._lease.stop()
        grace = self.settings.stop_grace_s if grace_s is None else grace_s
        running = [w for w in self.workers.values() if w.phase is not Phase.STOPPED]
        await asyncio.gather(*(self._stop_run(worker, grace) for worker in running))
        for worker in running:
            worker.phase = Phase.STOPPED
            await self._emit(worker, LifecycleKind.STOPPED, reason="stopped")
            await asyncio.to_thread(worker.output.close)
            await worker.client.aclose()

    # -- the reconcile loop --------------------------------------------------------------------

    async def reconcile(self) -> None:
        """One round: notice exits of ready workers, start those whose backoff is over."""
        for worker in list(self.workers.values()):
            if worker.busy or self._stopped:
                continue
            if worker.phase is Phase.READY and not worker.process.running:
                worker.record_exit()
                log.warning("worker %s exited: %s", worker.name, worker.reason)
                await self._emit(worker, LifecycleKind.EXITED, reason=worker.reason, failure=True)
                await self._decide(worker)
            elif worker.phase is Phase.BACKOFF and self._due(worker):
                self._launch(worker)

    def _due(self, worker: ManagedWorker) -> bool:
        return worker.restart_at_s is None or self.clock() >= worker.restart_at_s

    def _launch(self, worker: ManagedWorker) -> None:
        self._start_task(worker, self._bring_up(worker))

    def _start_task(self, worker: ManagedWorker, bring_up: Coroutine[Any, Any, None]) -> None:
        worker.phase = Phase.STARTING
        worker.bring_up_task = asyncio.create_task(bring_up, name=f"bring-up-{worker.name}")

    async def _adopt(self, worker: ManagedWorker) -> None:
        """A worker the previous gateway left running: ready as soon as it answers (it was
        warm); one that does not answer is replaced by a fresh start."""
        worker.adopted()
        try:
            await worker.wait_answering(ADOPT_TIMEOUT_S, self.probe)
        except ProcessStartError as exc:
            log.warning("worker %s: adopted process unusable (%s); restarting", worker.name, exc)
            await asyncio.to_thread(worker.process.kill)
            await self._bring_up(worker)
            return
        worker.mark_ready(())
        log.info(
            "worker %s adopted (pid %s) at %s", worker.name, worker.process.pid, worker.handle.url
        )
        await self._emit(worker, LifecycleKind.READY, reason="adopted")

    async def _bring_up(self, worker: ManagedWorker) -> None:
        """Spawn (in the loop's thread: the child's parent-death signal follows it), wait
        until it answers, warm it up; a failure on the way is a failed start."""
        try:
            worker.spawn()
            await self._emit(worker, LifecycleKind.SPAWNED)
            warmups = await worker.bring_up(self.settings, self.probe, self.warmer)
        except (ProcessStartError, WarmupError, OSError) as exc:
            await self._failed_start(worker, str(exc))
            return
        except Exception as exc:
            log.exception("worker %s: bring-up failed", worker.name)
            await self._failed_start(worker, repr(exc))
            return
        worker.mark_ready(warmups)
        log.info(
            "worker %s ready (pid %s) at %s", worker.name, worker.process.pid, worker.handle.url
        )
        await self._emit(worker, LifecycleKind.READY, warmups=warmups)

    async def _failed_start(self, worker: ManagedWorker, why: str) -> None:
        await asyncio.to_thread(worker.process.kill)
        worker.record_exit(f"failed to start: {why}")
        log.warning("worker %s: %s", worker.name, worker.reason)
        await self._emit(worker, LifecycleKind.EXITED, reason=worker.reason, failure=True)
        await self._decide(worker)

    async def _decide(self, worker: ManagedWorker) -> None:
        decision = worker.decide(self.settings.restart)
        if isinstance(decision, Restart):
            log.info("worker %s: %s", worker.name, decision.reason)
            await self._emit(
                worker,
                LifecycleKind.RESTART_SCHEDULED,
                reason=decision.reason,
                delay_s=decision.delay_s,
            )
        else:
            log.error("worker %s failed, not restarting: %s", worker.name, decision.reason)
            await self._emit(worker, LifecycleKind.GAVE_UP, reason=decision.reason)

    async def _stop_run(self, worker: ManagedWorker, grace_s: float) -> None:
        worker.phase = Phase.STOPPING
        worker.handle.ready, worker.handle.stopping = False, True
        task = worker.bring_up_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.to_thread(worker.process.terminate, grace_s)

    async def _emit(self, worker: ManagedWorker, kind: LifecycleKind, **facts: object) -> None:
        event = WorkerEvent(
            kind, worker.name, self.clock(), pid=worker.process.pid,
            exit_code=worker.process.returncode, **facts,  # type: ignore[arg-type]
        )  # fmt: skip
        for sink in list(self._sinks):
            try:
                await sink(event)
            except Exception:
                log.exception("lifecycle event %s of %s not handled", kind, worker.name)

    # -- building ------------------------------------------------------------------------------

    def _make_dirs(self) -> None:
        self.layout.input_dir.mkdir(parents=True, exist_ok=True)
        self.layout.frontend_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            self.layout.output_dir(spec.name).mkdir(parents=True, exist_ok=True)
            self.layout.temp_parent(spec.name).mkdir(parents=True, exist_ok=True)

    def _build(self, spec: WorkerSpec) -> WorkerHandle:
        if spec.url is not None:
            return WorkerHandle(spec=spec, url=spec.url.rstrip("/"), ready=True)
        port = spec.port or recorded_port(self._keeping(spec.name).record) or self.port_for()
        url = f"http://127.0.0.1:{port}"
        output = LogCapture(
            self._keeping(spec.name).log,
            max_bytes=self.settings.log_max_bytes,
            backups=self.settings.log_backups,
            owner=False,  # the keeper writes it
        )
        process, plan, refusal = self._process(spec, port, output)
        handle = WorkerHandle(spec=spec, url=url, process=process)
        worker = ManagedWorker(
            handle, process, client=ComfyClient(url), output=output, plan=plan,
            preload=spec.preload, clock=self.clock,
        )  # fmt: skip
        if refusal is not None:
            worker.fail(refusal)
        self.workers[spec.name] = worker
        return handle

    def _keeping(self, name: str) -> Keeping:
        return Keeping(
            lease=self.lease_path,
            record=self.layout.root / name / "keeper.json",
            log=self.layout.root / name / "worker.log",
            grace_s=self.settings.orphan_grace_s,
            log_max_bytes=self.settings.log_max_bytes,
            log_backups=self.settings.log_backups,
        )

    def _kept(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None,
        output: LogCapture,
        port: int,
    ) -> ChildProcess:
        name = output.path.parent.name
        return KeptProcess(argv, self._keeping(name), port=port, env=env, cwd=cwd)

    def _process(
        self, spec: WorkerSpec, port: int, output: LogCapture
    ) -> tuple[ChildProcess, LaunchPlan | None, str | None]:
        """The (not started) process of one run of `spec` on `port`, its launch plan, and why
        its args are refused (None: they are not)."""
        plan, refusal = self._plan(spec)
        launched = dataclasses.replace(spec, args=plan.args) if plan else spec
        if spec.emulate is not None:
            argv, cwd = emulator_argv(launched, port, self.layout), None
        else:
            argv, cwd = comfyui_argv(launched, port, self.layout), spec.comfyui
        env = worker_env(spec, self.environ)
        return self.spawn(argv, env=env, cwd=cwd, output=output, port=port), plan, refusal

    def _plan(self, spec: WorkerSpec) -> tuple[LaunchPlan | None, str | None]:
        try:
            return plan_launch(spec.args, self.vram_of(spec)), None
        except FlagError as exc:
            return None, f"launch args refused: {exc}"
