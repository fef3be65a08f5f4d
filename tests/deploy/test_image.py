"""The Dockerfile, read by BuildKit's own parser (no Docker daemon here), and the pins it and
`make` install with."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Sequence

import dockerfile
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gateway.api.auth import OPEN_PATHS
from gateway.settings import Settings
from tests.deploy.files import ROOT, served_get_routes, unknown_settings

DOCKERFILE = ROOT / "Dockerfile"
CONSTRAINTS = ROOT / "constraints.txt"
Stage = list[dockerfile.Command]


def stages() -> dict[str, Stage]:
    """Instructions by stage name (`FROM x AS name`), in order; the last stage is the default."""
    out: dict[str, Stage] = {}
    current: Stage = []
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd == "FROM":
            current = [command]
            out[command.value[-1] if len(command.value) == 3 else command.value[0]] = current
        elif out:
            current.append(command)
    return out


def lineage(name: str) -> list[Stage]:
    """A stage and the stages it is built FROM, the stage itself last."""
    chain = [stages()[name]]
    while (parent := chain[0][0].value[0]) in stages():
        chain.insert(0, stages()[parent])
    return chain


def last(chain: Sequence[Stage], instruction: str) -> dockerfile.Command | None:
    found = [c for stage in chain for c in stage if c.cmd == instruction]
    return found[-1] if found else None


def environment(chain: Sequence[Stage]) -> dict[str, str]:
    """What the ENV instructions of these stages set, later ones winning."""
    env: dict[str, str] = {}
    for command in (c for stage in chain for c in stage if c.cmd == "ENV"):
        env.update(zip(command.value[::2], command.value[1::2], strict=True))
    return env


def pins() -> dict[str, str]:
    lines = [ln.strip() for ln in CONSTRAINTS.read_text().splitlines()]
    pairs = [ln.split("==") for ln in lines if ln and not ln.startswith("#")]
    return {canonicalize_name(name): version for name, version in pairs}


def test_it_is_multi_stage_and_builds_the_gateway_alone_by_default() -> None:
    names = list(stages())
    assert len(names) >= 3
    assert names[-1] == "runtime"
    copied = [c for stage in lineage("runtime") for c in stage if c.cmd == "COPY"]
    assert any(c.flags == ("--from=build",) for c in copied), "runtime takes the build's venv"
    assert not any(c.cmd == "RUN" and "pip install" in c.value[0] for c in stages()["runtime"])


def test_every_image_runs_as_a_user_that_is_not_root() -> None:
    for name in ("runtime", "comfyui"):
        user = last(lineage(name), "USER")
        assert user is not None and user.value[0] not in ("root", "0"), name


def test_the_healthcheck_asks_the_open_healthz_route_with_python_alone() -> None:
    check = last(lineage("runtime"), "HEALTHCHECK")
    assert check is not None and check.value[0] == "CMD"
    command = check.value[1:]
    assert command[:2] == ("python", "-c")
    assert "urllib.request" in command[2]
    assert "/healthz" in command[2]
    assert "/healthz" in served_get_routes() and "/healthz" in OPEN_PATHS
    ports = [c.value[0] for stage in lineage("runtime") for c in stage if c.cmd == "EXPOSE"]
    assert ports == [str(Settings().port)]
    assert f"'{Settings().port}'" in command[2]


def test_the_data_dir_is_a_volume_and_the_settings_are_real() -> None:
    chain = lineage("comfyui")
    env = environment(chain)
    assert unknown_settings(list(env)) == []
    volume = last(chain, "VOLUME")
    assert volume is not None and env["COMFY_GATEWAY_DATA_DIR"] in volume.value
    entrypoint = last(chain, "ENTRYPOINT")
    assert entrypoint is not None and "comfy-gateway" in entrypoint.value
    assert env["COMFY_GATEWAY_HOST"] == "0.0.0.0"


def test_the_image_installs_with_the_constraints_and_copies_only_what_it_may() -> None:
    build = stages()["build"]
    installs = [c.value[0] for c in build if c.cmd == "RUN" and "pip install" in c.value[0]]
    assert installs and all(re.search(r"-c constraints\.txt\b", line) for line in installs)
    sources = [src for c in build if c.cmd == "COPY" for src in c.value[:-1]]
    assert "constraints.txt" in sources
    allowed = [ln[1:].rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.startswith("!")]  # fmt: skip
    for source in sources:
        assert (ROOT / source).exists(), source
        assert any(fnmatch.fnmatch(source, pattern) for pattern in allowed), source


def test_make_installs_with_the_same_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    installs = [ln for ln in makefile.splitlines() if "pip install" in ln and "-e" in ln]
    assert installs and all("-c constraints.txt" in line for line in installs)


def test_every_dependency_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pinned = pins()
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not in constraints.txt (make constraints)"
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]}: {text}"
