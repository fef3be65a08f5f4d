"""Farm specs of the simulator: what they describe, and a clear refusal of what they cannot."""

from __future__ import annotations

import pytest

from bench.sim.__main__ import main
from bench.sim.farm import parse_farm


def test_a_spec_names_counts_profiles_and_cache_flags() -> None:
    farm = parse_farm("2*h200@lru8, rtx4070ti")
    assert [(w.name, w.profile, w.flags) for w in farm] == [
        ("h200-0", "h200", ("--cache-lru", "8")),
        ("h200-1", "h200", ("--cache-lru", "8")),
        ("rtx4070ti-2", "rtx4070ti", ()),
    ]
    assert len(parse_farm("mixed4")) == 4


@pytest.mark.parametrize("spec", ["0*h200", "h200,,rtx4070ti", "x*h200", "2*", "-1*h200"])
def test_a_spec_that_is_no_farm_is_refused_naming_the_part(spec: str) -> None:
    with pytest.raises(ValueError, match="is not COUNT\\*PROFILE"):
        parse_farm(spec)


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--farm", "3*a100"], "unknown profile 'a100'"),
        (["--farm", "2*h200@fp16"], "unknown flag suffix 'fp16'"),
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--k", "0"], "--k takes at least 1"),
    ],
)
def test_the_command_line_refuses_a_bad_scenario_as_a_usage_error(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--jobs", "5", *argv])
    assert exited.value.code == 2
    assert reason in capsys.readouterr().err
