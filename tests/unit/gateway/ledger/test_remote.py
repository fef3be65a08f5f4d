"""The ledger's command lines against a gateway that is not there: one line, not a traceback."""

from __future__ import annotations

import pytest

from gateway.ledger.cli import report_main
from gateway.ledger.remote import Gateway, RemoteError
from workers.supervision.ports import free_port


def test_no_gateway_at_the_url_is_a_remote_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with (
        Gateway(url) as gateway,
        pytest.raises(RemoteError, match=f"no answer from the gateway at {url}"),
    ):
        gateway.report("ab")


def test_ab_report_without_a_gateway_says_so_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert report_main(["ab", "--url", url, "--no-plot"]) == 1
    assert capsys.readouterr().err.startswith(
        f"comfy-gateway ab: no answer from the gateway at {url}"
    )
