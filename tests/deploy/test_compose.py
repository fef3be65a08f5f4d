"""deploy/compose.yaml: valid Compose, wired to files that exist and to the gateway's settings."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.deploy.files import (
    DEPLOY,
    FARM_TOML,
    serve_flags,
    settings_from,
    stop_budget_s,
    unknown_settings,
    yaml_documents,
)

COMPOSE = DEPLOY / "compose.yaml"
DURATION = re.compile(r"^(\d+)s$")
# `docker compose config` needs these set (the file refuses to start without them).
REQUIRED_ENV = {
    "COMFY_GATEWAY_AUTH_TOKEN": "t0ken",
    "GRAFANA_ADMIN_PASSWORD": "pw",
    "COMFYUI_DIR": "/opt/ComfyUI",
}


def compose() -> dict[str, Any]:
    (doc,) = yaml_documents(COMPOSE)
    return doc


def service(name: str) -> dict[str, Any]:
    return dict(compose()["services"][name])


def bind_sources(name: str) -> dict[str, str]:
    """Container path -> host path of a service's bind mounts (named volumes left out)."""
    binds = {}
    for volume in service(name).get("volumes", []):
        if isinstance(volume, dict):
            if volume["type"] == "bind":
                binds[volume["target"]] = volume["source"]
            continue
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            binds[target] = source
    return binds


def seconds(duration: str) -> int:
    match = DURATION.match(duration)
    assert match, f"write durations in seconds: {duration}"
    return int(match.group(1))


def test_it_is_valid_against_the_compose_specification() -> None:
    vendored = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads((vendored / "compose-spec.json").read_text())
    jsonschema.validate(compose(), schema)


def test_docker_compose_accepts_it() -> None:
    docker = shutil.which("docker")
    probe = [docker, "compose", "version"] if docker else None
    if probe is None or subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        pytest.skip("no docker compose here")
    assert docker is not None
    env = {**os.environ, **REQUIRED_ENV}
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "-q"],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_every_bind_mount_of_a_repository_file_exists() -> None:
    for name in compose()["services"]:
        for target, source in bind_sources(name).items():
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} -> {target}"


def test_the_gateway_command_parses_and_names_the_mounted_farm_file(tmp_path: Path) -> None:
    gateway = service("gateway")
    flags = serve_flags(gateway["command"])
    assert flags["redis_url"] == "redis://redis:6379/0"
    assert bind_sources("gateway")[flags["config"]] == f"./{FARM_TOML.name}"
    assert unknown_settings(list(gateway["environment"])) == []
    settings_from(FARM_TOML.read_text(), tmp_path)


def test_the_gateway_gets_the_gpus_the_models_and_time_to_drain(tmp_path: Path) -> None:
    gateway = service("gateway")
    assert bind_sources("gateway")["/comfyui/models"].endswith("}/models")
    (devices,) = gateway["deploy"]["resources"]["reservations"]["devices"]
    assert devices["driver"] == "nvidia"
    assert "gpu" in devices["capabilities"]
    budget_s = stop_budget_s(settings_from(FARM_TOML.read_text(), tmp_path))
    # Docker's default is 10 s and then SIGKILL: the running jobs would be cut.
    assert seconds(gateway["stop_grace_period"]) > budget_s
    assert "/healthz" in " ".join(gateway["healthcheck"]["test"])
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"


def test_redis_appends_to_a_volume_and_never_evicts() -> None:
    redis = service("redis")
    command = redis["command"]
    option = {command[i]: command[i + 1] for i in range(1, len(command) - 1, 2)}
    assert option["--appendonly"] == "yes"
    assert option["--maxmemory-policy"] == "noeviction"
    volume = next(v for v in redis["volumes"] if v.endswith(":/data"))
    assert volume.split(":")[0] in compose()["volumes"]
