"""Per-card telemetry from NVML: memory, utilisation, temperature, power, SM clock.

`Telemetry` samples every GPU in the background and keeps the latest reading of each. Without
NVIDIA hardware (no driver, no library, no GPU) it says so (`available=False` and a reason) and
everything else keeps working. The NVML backend is injected: `pynvml` in production, any object
with the same functions in tests.

GPU indices are NVML's (nvidia-smi's), which follow PCI bus order. CUDA numbers GPUs fastest
first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so workers should run with that set for a slot's
index to name the same card here and in CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

MIB = 1 << 20
DEFAULT_INTERVAL_S = 2.0
_T = TypeVar("_T")


class MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...
    @property
    def used(self) -> int: ...


class Utilization(Protocol):
    @property
    def gpu(self) -> int: ...


class Nvml(Protocol):
    """The part of `pynvml` (nvidia-ml-py) used here; the module itself satisfies it."""

    @property
    def NVMLError(self) -> type[Exception]: ...
    @property
    def NVML_TEMPERATURE_GPU(self) -> int: ...
    @property
    def NVML_CLOCK_SM(self) -> int: ...

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> MemoryInfo: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Utilization: ...
    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int: ...
    def nvmlDeviceGetPowerUsage(self, handle: object) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: object, clock_type: int) -> int: ...


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. A reading the card does not support (power on some boards,
    for instance) is None; memory is always there.

    `memory_used_mib` includes what the driver reserves (NVML's first memory-info version:
    about 600 MiB on an idle H200 where nvidia-smi shows 0), so `memory_free_mib` is what
    processes can still allocate.
    """

    index: int
    name: str
    memory_used_mib: float
    memory_total_mib: float
    utilization_pct: int | None
    temperature_c: int | None
    power_w: float | None
    sm_clock_mhz: int | None
    sampled_at_s: float

    @property
    def memory_free_mib(self) -> float:
        return self.memory_total_mib - self.memory_used_mib


@dataclass(frozen=True)
class TelemetrySnapshot:
    """The latest reading of every GPU (by index) and of why some could not be read.

    `available` False: NVML cannot be used at all, `reason` says why, `gpus` is empty.
    `errors` maps a GPU whose last read failed (e.g. "GPU is lost") to the error; that GPU has
    no entry in `gpus`, so no stale reading outlives a failure.
    """

    available: bool
    reason: str | None = None
    gpus: Mapping[int, GpuSample] = field(default_factory=lambda: MappingProxyType({}))
    errors: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    sampled_at_s: float | None = None


class Telemetry:
    """Samples the GPUs every `interval_s` seconds in an asyncio task, keeps the latest.

    `nvml` None means the `pynvml` module (imported on `open`). `indices` limits sampling to
    some GPUs (default: every GPU NVML counts). `clock` stamps each sample.
    Use `async with Telemetry() as telemetry:` or `start()` / `stop()`.
    """

    def __init__(
        self,
        nvml: Nvml | None = None,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        indices: Sequence[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self._nvml = nvml
        self._indices = tuple(indices) if indices is not None else None
        self._clock = clock
        self._opened = False
        self._snapshot = TelemetrySnapshot(available=False, reason="NVML: not opened yet")
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def available(self) -> bool:
        return self._snapshot.available

    @property
    def reason(self) -> str | None:
        """Why telemetry is unavailable (None when it is available)."""
        return self._snapshot.reason

    def open(self) -> bool:
        """Initialise NVML once; returns whether telemetry is available. Never raises for a
        missing driver, library or GPU: that is recorded as the reason instead."""
        if not self._opened:
            self._opened = True
            self._snapshot = self._init()
        return self.available

    def close(self) -> None:
        """Shut NVML down (if it was initialised); until the next `open`, telemetry reports
        itself unavailable."""
        if self._opened and self.available and self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
        self._opened = False
        self._snapshot = TelemetrySnapshot(available=False, reason="NVML: closed")

    def sample(self) -> TelemetrySnapshot:
        """Read every GPU now, keep it as the latest and return it (the unavailable snapshot
        when NVML cannot be used). NVML calls block; the background task reads in a thread."""
        self._snapshot = self._read_all()
        return self._snapshot

    def snapshot(self) -> TelemetrySnapshot:
        """The latest snapshot, without sampling."""
        return self._snapshot

    async def start(self) -> None:
        """Open NVML, take a first sample, then keep sampling in the background (no task when
        telemetry is unavailable). Calling it again does nothing."""
        if self._task is not None:
            return
        if self.open():
            self._snapshot = await asyncio.to_thread(self._read_all)
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="gpu-telemetry")

    async def stop(self) -> None:
        """Stop the background sampling (a sample under way finishes first, so no NVML call
        outlives it) and shut NVML down."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping.set()
            await task
        self.close()

    async def __aenter__(self) -> Telemetry:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _run(self) -> None:
        while not await self._stop_requested(self.interval_s):
            try:
                self._snapshot = await asyncio.to_thread(self._read_all)
            except Exception:
                # A bug or an unexpected driver error must not end telemetry for good.
                log.exception("GPU telemetry sample failed")

    async def _stop_requested(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._stopping.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def _read_all(self) -> TelemetrySnapshot:
        nvml = self._nvml
        if not self.available or nvml is None or self._indices is None:
            return self._snapshot
        now_s = self._clock()
        gpus: dict[int, GpuSample] = {}
        errors: dict[int, str] = {}
        for index in self._indices:
            try:
                gpus[index] = read_gpu(nvml, index, now_s)
            except nvml.NVMLError as exc:
                errors[index] = f"NVML: {exc}"
        return TelemetrySnapshot(
            True, None, MappingProxyType(gpus), MappingProxyType(errors), now_s
        )

    def _init(self) -> TelemetrySnapshot:
        if self._nvml is None:
            nvml = load_nvml()
            if nvml is None:
                return TelemetrySnapshot(False, "NVML: the nvidia-ml-py package is not installed")
            self._nvml = nvml
        return self._init_with(self._nvml)

    def _init_with(self, nvml: Nvml) -> TelemetrySnapshot:
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            return TelemetrySnapshot(False, f"NVML: {exc}")
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            count, reason = 0, f"NVML: {exc}"
        else:
            reason = "NVML: no NVIDIA GPU found"
        if count == 0:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlShutdown()
            return TelemetrySnapshot(False, reason)
        if self._indices is None:
            self._indices = tuple(range(count))
        log.info("GPU telemetry: %d GPU(s), sampling %s", count, list(self._indices))
        return TelemetrySnapshot(True)


def read_gpu(nvml: Nvml, index: int, now_s: float) -> GpuSample:
    """One reading of GPU `index`. Raises `nvml.NVMLError` when the GPU or its memory cannot
    be read; an unsupported optional reading becomes None."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    power_mw = _optional(nvml, lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    return GpuSample(
        index=index,
        name=_name(_optional(nvml, lambda: nvml.nvmlDeviceGetName(handle)), index),
        memory_used_mib=memory.used / MIB,
        memory_total_mib=memory.total / MIB,
        utilization_pct=_optional(nvml, lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        temperature_c=_optional(
            nvml, lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        ),
        power_w=None if power_mw is None else power_mw / 1000.0,
        sm_clock_mhz=_optional(
            nvml, lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
        ),
        sampled_at_s=now_s,
    )


def _optional(nvml: Nvml, read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except nvml.NVMLError:
        return None


def _name(raw: str | bytes | None, index: int) -> str:
    if raw is None:
        return f"GPU {index}"
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw


def load_nvml() -> Nvml | None:
    """The `pynvml` module, or None when it is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    nvml: Nvml = pynvml
    return nvml
