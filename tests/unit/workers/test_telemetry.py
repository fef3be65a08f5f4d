"""GPU telemetry: readings through a fake NVML, no hardware, the background sampler, slots."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from workers.gpus import visible_gpus
from workers.telemetry import GpuSample, Telemetry

MIB = 1 << 20


class FakeNvmlError(Exception):
    """Stands in for pynvml.NVMLError."""


@dataclass
class FakeGpu:
    """One card; a reading set to None is "Not Supported"."""

    name: str | bytes = "NVIDIA H200"
    total_mib: int = 143771
    used_mib: int = 1024
    utilization_pct: int | None = 37
    temperature_c: int | None = 41
    power_mw: int | None = 120_500
    sm_clock_mhz: int | None = 1980
    lost: bool = False


@dataclass
class FakeNvml:
    """The functions of pynvml that telemetry calls, over a list of FakeGpu."""

    gpus: list[FakeGpu] = field(default_factory=lambda: [FakeGpu()])
    init_error: str | None = None
    count_error: str | None = None
    crash_on_reads: frozenset[int] = frozenset()
    inits: int = 0
    shutdowns: int = 0
    reads: int = 0

    NVMLError = FakeNvmlError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNvmlError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        if self.count_error is not None:
            raise FakeNvmlError(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        self.reads += 1
        if self.reads in self.crash_on_reads:
            raise RuntimeError("driver bug")
        if index >= len(self.gpus):
            raise FakeNvmlError("Invalid Argument")
        if self.gpus[index].lost:
            raise FakeNvmlError("GPU is lost")
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: object) -> str | bytes:
        return gpu(handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _Memory:
        return _Memory(total=gpu(handle).total_mib * MIB, used=gpu(handle).used_mib * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> _Utilization:
        return _Utilization(gpu=_supported(gpu(handle).utilization_pct))

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return _supported(gpu(handle).temperature_c)

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        return _supported(gpu(handle).power_mw)

    def nvmlDeviceGetClockInfo(self, handle: object, clock_type: int) -> int:
        assert clock_type == self.NVML_CLOCK_SM
        return _supported(gpu(handle).sm_clock_mhz)


@dataclass(frozen=True)
class _Memory:
    total: int
    used: int


@dataclass(frozen=True)
class _Utilization:
    gpu: int


def gpu(handle: object) -> FakeGpu:
    assert isinstance(handle, FakeGpu)
    return handle


def _supported(value: int | None) -> int:
    if value is None:
        raise FakeNvmlError("Not Supported")
    return value


def ticking_clock(start_s: float = 100.0) -> Iterator[float]:
    return itertools.count(start_s, 1.0)


def opened(nvml: FakeNvml, **kwargs: object) -> Telemetry:
    clock = ticking_clock()
    telemetry = Telemetry(nvml, clock=lambda: next(clock), **kwargs)  # type: ignore[arg-type]
    telemetry.open()
    return telemetry


# --- readings ------------------------------------------------------------------------------


def test_a_sample_reads_every_gpu_in_the_units_of_its_names() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(name=b"NVIDIA H100", used_mib=80_000, power_mw=700_000)])

    snapshot = opened(nvml).sample()

    assert snapshot.available and snapshot.reason is None and not snapshot.errors
    assert snapshot.gpus[0] == GpuSample(
        index=0,
        name="NVIDIA H200",
        memory_used_mib=1024.0,
        memory_total_mib=143771.0,
        utilization_pct=37,
        temperature_c=41,
        power_w=120.5,
        sm_clock_mhz=1980,
        sampled_at_s=100.0,
    )
    assert snapshot.gpus[1].name == "NVIDIA H100"
    assert snapshot.gpus[1].power_w == 700.0
    assert snapshot.gpus[1].memory_free_mib == 143771 - 80_000


def test_readings_a_card_does_not_support_are_none() -> None:
    gpu = FakeGpu(utilization_pct=None, temperature_c=None, power_mw=None, sm_clock_mhz=None)

    sample = opened(FakeNvml([gpu])).sample().gpus[0]

    assert (sample.utilization_pct, sample.temperature_c, sample.power_w) == (None, None, None)
    assert sample.sm_clock_mhz is None
    assert sample.memory_total_mib == 143771.0


def test_a_lost_gpu_is_reported_and_has_no_stale_reading() -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu()])
    telemetry = opened(nvml)
    telemetry.sample()
    nvml.gpus[1].lost = True

    snapshot = telemetry.sample()

    assert snapshot.errors == {1: "NVML: GPU is lost"}
    assert set(snapshot.gpus) == {0}
    assert telemetry.snapshot().gpus.get(1) is None
    assert telemetry.snapshot().gpus.get(0) is not None


def test_indices_limit_sampling_and_a_missing_index_is_an_error() -> None:
    telemetry = opened(FakeNvml([FakeGpu(), FakeGpu(), FakeGpu()]), indices=[2, 5])

    snapshot = telemetry.sample()

    assert set(snapshot.gpus) == {2}
    assert snapshot.errors == {5: "NVML: Invalid Argument"}


def test_each_sample_is_stamped_by_the_injected_clock() -> None:
    telemetry = opened(FakeNvml())

    first = telemetry.sample()
    second = telemetry.sample()

    assert (first.sampled_at_s, second.sampled_at_s) == (100.0, 101.0)
    assert telemetry.snapshot() is second


# --- no hardware ---------------------------------------------------------------------------

UNAVAILABLE = [
    (FakeNvml(init_error="Driver Not Loaded"), "NVML: Driver Not Loaded", 0),
    (FakeNvml(gpus=[]), "NVML: no NVIDIA GPU found", 1),
    (FakeNvml(count_error="Unknown Error"), "NVML: Unknown Error", 1),
]


@pytest.mark.parametrize(("nvml", "reason", "shutdowns"), UNAVAILABLE)
async def test_without_usable_nvml_telemetry_says_why_and_keeps_working(
    nvml: FakeNvml, reason: str, shutdowns: int
) -> None:
    telemetry = Telemetry(nvml)

    async with telemetry:
        assert not telemetry.available
        assert telemetry.reason == reason
        assert telemetry.sample().gpus == {}
        assert telemetry.snapshot().gpus.get(0) is None
    assert nvml.shutdowns == shutdowns


def test_before_open_telemetry_is_unavailable() -> None:
    telemetry = Telemetry(FakeNvml())

    assert not telemetry.available
    assert telemetry.sample().reason == "NVML: not opened yet"


def test_the_real_nvml_library_on_this_machine_does_not_raise() -> None:
    telemetry = Telemetry()

    if telemetry.open():  # a machine with an NVIDIA driver and GPUs
        snapshot = telemetry.sample()
        telemetry.close()
        assert snapshot.gpus
        assert all(gpu.memory_total_mib > 0 for gpu in snapshot.gpus.values())
    else:
        assert telemetry.reason is not None
        assert telemetry.reason.startswith("NVML: ")
        assert telemetry.sample().gpus == {}


def test_without_the_nvml_package_telemetry_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import pynvml` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    telemetry = Telemetry()

    assert not telemetry.open()
    assert telemetry.reason == "NVML: the nvidia-ml-py package is not installed"
    assert visible_gpus({}) == ()
    telemetry.close()


def test_a_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        Telemetry(FakeNvml(), interval_s=0)


# --- background sampling -------------------------------------------------------------------


async def wait_for_sample_after(telemetry: Telemetry, after_s: float) -> None:
    for _ in range(1000):
        if (telemetry.snapshot().sampled_at_s or 0) > after_s:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"no sample after {after_s} within 5 s")


async def test_the_background_task_keeps_the_latest_sample() -> None:
    nvml = FakeNvml()
    clock = ticking_clock()
    telemetry = Telemetry(nvml, interval_s=0.01, clock=lambda: next(clock))

    await telemetry.start()
    assert telemetry.snapshot().sampled_at_s == 100.0  # sampled once before start returns
    nvml.gpus[0].used_mib = 50_000
    await wait_for_sample_after(telemetry, 101.0)
    latest = telemetry.snapshot().gpus.get(0)
    await telemetry.stop()

    assert latest is not None and latest.memory_used_mib == 50_000
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
    assert not telemetry.available
    assert telemetry.reason == "NVML: closed"


async def test_the_background_task_survives_a_failing_sample() -> None:
    nvml = FakeNvml(crash_on_reads=frozenset({2}))
    clock = ticking_clock()
    telemetry = Telemetry(nvml, interval_s=0.01, clock=lambda: next(clock))

    async with telemetry:
        await wait_for_sample_after(telemetry, 100.0)

    assert nvml.reads >= 3


async def test_starting_twice_opens_nvml_once() -> None:
    nvml = FakeNvml()
    telemetry = Telemetry(nvml, interval_s=60)

    await telemetry.start()
    await telemetry.start()
    await telemetry.stop()
    await telemetry.stop()

    assert (nvml.inits, nvml.shutdowns) == (1, 1)


async def test_telemetry_can_be_started_again_after_a_stop() -> None:
    nvml = FakeNvml()
    telemetry = Telemetry(nvml, interval_s=60)

    async with telemetry:
        pass
    async with telemetry:
        assert telemetry.available

    assert (nvml.inits, nvml.shutdowns) == (2, 2)
