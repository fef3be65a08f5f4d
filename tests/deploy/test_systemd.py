"""deploy/comfy-gateway.service: restarts on failure, stops by draining, keeps the GPUs."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gateway.settings import Settings
from tests.deploy.files import (
    DEPLOY,
    FARM_TOML,
    exec_argv,
    serve_flags,
    settings_from,
    stop_budget_s,
    unknown_settings,
)

UNIT = DEPLOY / "comfy-gateway.service"
ENV_EXAMPLE = DEPLOY / "gateway.env.example"
SECONDS = re.compile(r"^(\d+)s?$")
# Each hides the GPUs from the service or breaks CUDA's code generation.
BREAKS_GPUS = ("PrivateDevices", "DevicePolicy", "DeviceAllow", "MemoryDenyWriteExecute")


def service_section() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text())
    return unit["Service"]


def test_it_restarts_on_failure_as_a_dedicated_user() -> None:
    service = service_section()
    assert service["Restart"] == "on-failure"
    assert service["User"] not in ("", "root", "0")
    assert service["EnvironmentFile"].lstrip("-") == "/etc/comfy-gateway/gateway.env"


def test_the_stop_is_a_drain_within_the_stop_timeout(tmp_path: Path) -> None:
    service = service_section()
    assert service["KillSignal"] == "SIGTERM"
    # process: SIGTERM to the gateway alone, which drains and stops its workers itself; and
    # after a crash its workers are left for the restarted gateway to adopt
    assert service["KillMode"] == "process"
    match = SECONDS.match(service["TimeoutStopSec"])
    assert match, service["TimeoutStopSec"]
    timeout_s = int(match.group(1))
    assert timeout_s > stop_budget_s(Settings())
    assert timeout_s > stop_budget_s(settings_from(FARM_TOML.read_text(), tmp_path))


def test_the_command_and_environment_are_the_gateway_s(tmp_path: Path) -> None:
    service = service_section()
    flags = serve_flags(exec_argv(service["ExecStart"]))
    assert flags["config"] == "/etc/comfy-gateway/farm.toml"
    environment = [pair.split("=")[0] for pair in service["Environment"].split()]
    example = [
        line.split("=")[0]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert unknown_settings(environment + example) == []
    data_dir = next(p for p in service["Environment"].split() if p.startswith("COMFY_GATEWAY_DATA"))
    assert data_dir.split("=")[1] in service["ReadWritePaths"].split()


def test_the_hardening_keeps_the_gpus_reachable() -> None:
    service = service_section()
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert [key for key in BREAKS_GPUS if key in service] == []


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze here")
    # The unit as installed, but for a program that exists on this machine.
    text = re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", UNIT.read_text(), flags=re.M)
    copy = tmp_path / UNIT.name
    copy.write_text(text)
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, check=False, timeout=60
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
