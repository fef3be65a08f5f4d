"""GPU visibility and slots: CUDA_VISIBLE_DEVICES read as CUDA reads it, and `--gpus` syntax."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from workers.gpus import cuda_visible_devices, parse_gpu_slots, visible_gpus


class FakeNvmlError(Exception):
    """Stands in for pynvml.NVMLError."""


@dataclass
class CountingNvml:
    """Counts `gpus` devices, or fails the way a machine without a driver does."""

    gpus: int = 8
    init_error: bool = False
    count_error: bool = False
    inits: int = 0
    shutdowns: int = 0
    NVMLError: type[Exception] = FakeNvmlError

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNvmlError("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        if self.count_error:
            raise FakeNvmlError("Unknown Error")
        return self.gpus


VISIBLE = [
    ("0,1", (0, 1)),
    ("3", (3,)),
    (" 2 , 3 ", (2, 3)),
    ("", ()),
    ("-1", ()),
    ("0,-1,1", (0,)),
    ("0,,1", (0,)),
    ("GPU-8d2f3c1e-aaaa,1", (0, 1)),
    ("MIG-1a2b", (0,)),
    ("nope,0", ()),
]


@pytest.mark.parametrize(("value", "slots"), VISIBLE)
def test_cuda_visible_devices_gives_a_slot_per_gpu_cuda_shows(
    value: str, slots: tuple[int, ...]
) -> None:
    nvml = CountingNvml()

    assert visible_gpus({"CUDA_VISIBLE_DEVICES": value}, nvml) == slots
    assert len(cuda_visible_devices(value)) == len(slots)
    assert nvml.inits == 0


def test_hiding_every_gpu_with_minus_one_plans_no_gpu_worker() -> None:
    # CUDA reads -1 as "no device": no slot, so --comfyui without --gpus starts no worker.
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, CountingNvml()) == ()


@pytest.mark.parametrize(
    ("nvml", "slots"),
    [
        (CountingNvml(gpus=4), (0, 1, 2, 3)),
        (CountingNvml(init_error=True), ()),
        (CountingNvml(count_error=True), ()),
        (CountingNvml(gpus=0), ()),
    ],
)
def test_without_cuda_visible_devices_nvml_counts(
    nvml: CountingNvml, slots: tuple[int, ...]
) -> None:
    assert visible_gpus({"PATH": "/bin"}, nvml) == slots
    assert nvml.shutdowns == nvml.inits


SLOTS = [
    ("0,1", ["0", "1"]),
    ("0+1,2", ["0,1", "2"]),
    (" 0 + 1 , 2 ", ["0,1", "2"]),
    ("3", ["3"]),
    ("07", ["7"]),
    ("0+1+2+3,4+5", ["0,1,2,3", "4,5"]),
]


@pytest.mark.parametrize(("spec", "slots"), SLOTS)
def test_gpu_slots_parse_into_cuda_visible_devices_values(spec: str, slots: list[str]) -> None:
    assert parse_gpu_slots(spec) == slots


BAD_SLOTS = [
    ("", "empty"),
    ("  ", "empty"),
    ("0,,1", "empty slot"),
    ("0,", "empty slot"),
    ("0+", "empty slot or GPU in '0+'"),
    ("a", "'a' is not a GPU index"),
    ("-1", "'-1' is not a GPU index"),
    ("1.5", "'1.5' is not a GPU index"),
    ("²", "'²' is not a GPU index"),
    ("0+0", "GPU 0 is twice in slot '0+0'"),
    ("0,0", "GPU 0 is in two slots"),
    ("0+1,1", "GPU 1 is in two slots"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SLOTS)
def test_bad_gpu_slots_are_refused_clearly(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_gpu_slots(spec)


def test_sharing_a_gpu_between_slots_must_be_asked_for() -> None:
    assert parse_gpu_slots("0,0+1", allow_shared=True) == ["0", "0,1"]
