"""What the deployment files say, read as their tools read them, and what the gateway serves."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gateway.app import create_app
from gateway.serve import build_parser
from gateway.settings import Settings
from tests.faults.test_hung_worker import MARGIN_S

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
FARM_TOML = DEPLOY / "farm.toml"
ENV_PREFIX = "COMFY_GATEWAY_"
ENV_ALIASES = {"REDIS_URL": "redis_url"}


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object of deploy/k8s (the kustomization is kustomize's, not one)."""
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in yaml_documents(path):
                yield path, doc


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    for _, doc in k8s_documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in {K8S}")


def settings_from(toml_text: str, tmp_path: Path) -> Settings:
    """The settings a gateway started with this farm file has (the real loader, so an unknown
    or mistyped key fails here as it would at start)."""
    path = tmp_path / "farm.toml"
    path.write_text(toml_text)
    return Settings(config=path)


def stop_budget_s(settings: Settings) -> float:
    """How long a gateway takes at most from SIGTERM to exit: the drain, the children's grace,
    and the margin `tests/faults/test_hung_worker.py` measures it within."""
    return settings.drain_grace_s + settings.stop_grace_s + MARGIN_S


def setting_of(env_name: str) -> str | None:
    """The Settings field an environment variable sets; None for a variable of no setting."""
    if env_name in ENV_ALIASES:
        return ENV_ALIASES[env_name]
    if env_name.startswith(ENV_PREFIX):
        return env_name.removeprefix(ENV_PREFIX).lower()
    return None


def unknown_settings(env_names: list[str]) -> list[str]:
    """The COMFY_GATEWAY_ variables among these that no setting reads (a typo goes unseen:
    pydantic-settings ignores unknown variables)."""
    fields = Settings.model_fields
    return [name for name in env_names if (field := setting_of(name)) and field not in fields]


def serve_flags(argv: list[str]) -> dict[str, Any]:
    """`comfy-gateway serve` argv parsed by the real parser (it exits on an unknown flag)."""
    assert argv[0] == "serve", argv
    return vars(build_parser().parse_args(argv[1:]))


def exec_argv(command_line: str) -> list[str]:
    """A unit's ExecStart (or a shell line) without the program: `serve ...`."""
    return shlex.split(command_line)[1:]


@functools.cache
def served_get_routes() -> frozenset[str]:
    """Paths the gateway's app answers GET on, from the real app (no Redis needed to build)."""
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0"), [])
    paths: Mapping[str, Mapping[str, Any]] = app.openapi()["paths"]
    return frozenset(path for path, methods in paths.items() if "get" in methods)
