"""`comfy-gateway ab report NAME`: an experiment's report as a table, with a PNG plot of the
per-phase distributions per group; `--watch` follows it while jobs arrive."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from gateway.ledger.plot import NoPlotting, phase_boxes
from gateway.ledger.record import PHASES

DEFAULT_URL = "http://127.0.0.1:8188"
POLL_S = 2.0


def client(url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def fetch_report(http: httpx.Client, name: str) -> dict[str, Any]:
    answer = http.get("/gateway/ab", params={"experiment": name, "jobs": "true"})
    if answer.status_code != 200:
        raise SystemExit(f"comfy-gateway ab: {answer.status_code} {_error(answer)}")
    body: dict[str, Any] = answer.json()
    return body


def _error(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("error"))
    except ValueError:
        return answer.text


def watch(http: httpx.Client, name: str, timeout_s: float) -> dict[str, Any]:
    """Poll the report until its verdict calls a winner or `timeout_s` passed."""
    report = fetch_report(http, name)
    deadline = time.monotonic() + timeout_s
    with tqdm(desc=f"jobs of {name}", unit="job", initial=report["jobs"]) as bar:
        while "is faster" not in report["verdict"] and time.monotonic() < deadline:
            time.sleep(POLL_S)
            report = fetch_report(http, name)
            bar.update(report["jobs"] - bar.n)
            bar.set_postfix_str(report["verdict"][:60])
    return report


def table(report: Mapping[str, Any]) -> str:
    """Per group its jobs and warm medians; per comparison each measure's ratio and tests."""
    lines = [f"experiment {report['experiment']['name']}: {report['jobs']} timed jobs", ""]
    header = ["group", "cold", "warm", "exec p50", "exec p95", *(f"{p} p50" for p in PHASES)]
    rows = [header]
    for group, stats in report["groups"].items():
        warm = stats["warm"]
        rows.append(
            [
                group,
                str(stats["cold"]["exec_s"].get("n", 0)),
                str(warm["exec_s"].get("n", 0)),
                _s(warm["exec_s"].get("median")),
                _s(warm["exec_s"].get("p95")),
                *(_s(warm[p].get("median")) for p in PHASES),
            ]
        )
    lines += _aligned(rows)
    for comparison in report["comparisons"]:
        lines += ["", f"{comparison['group']} / {comparison['baseline']} (warm jobs):"]
        rows = [
            [
                "measure",
                "ratio",
                "always-valid 95%",
                "boot mean 95%",
                "boot p50 95%",
                "U p",
                "decided",
            ]
        ]
        for measure, m in comparison["measures"].items():
            rows.append(
                [
                    "execution" if measure == "exec_s" else measure,
                    f"{m['ratio']:.3f}",
                    _pair(m["interval"]),
                    _pair(m.get("bootstrap_mean_ratio")),
                    _pair(m.get("bootstrap_median_ratio")),
                    _p(m.get("mann_whitney_p")),
                    "yes" if m["decided"] else "no",
                ]
            )
        lines += _aligned(rows)
    lines += ["", report["verdict"]]
    return "\n".join(lines)


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pair(pair: Sequence[float] | None) -> str:
    return "-" if not pair else f"{pair[0]:.3f}-{pair[1]:.3f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def report_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="comfy-gateway ab report", description=__doc__)
    parser.add_argument("name", help="the experiment")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the gateway (default {DEFAULT_URL})")
    parser.add_argument("--token", default=None, help="the gateway's bearer token, if it has one")
    parser.add_argument("--plot", type=Path, default=None, help="PNG file (default NAME.png)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--watch",
        type=float,
        default=0.0,
        metavar="S",
        help="follow the report up to S seconds, until it calls a winner",
    )
    args = parser.parse_args(argv)
    with client(args.url, args.token) as http:
        report = watch(http, args.name, args.watch) if args.watch else fetch_report(http, args.name)
    print(table(report))
    if not args.no_plot:
        out = args.plot or Path(f"{args.name}.png")
        groups = report["experiment"]["groups"]
        try:
            phase_boxes(report["verdict"], report.get("job_times", []), groups, out)
            print(f"plot: {out}")
        except NoPlotting as exc:
            print(f"no plot: {exc}", file=sys.stderr)
    return 0


def main(argv: Sequence[str]) -> int:
    """`comfy-gateway ab SUBCOMMAND`."""
    if not argv or argv[0] != "report":
        print(
            "usage: comfy-gateway ab report NAME [--url URL] [--token T] [--plot FILE]",
            file=sys.stderr,
        )
        return 2
    return report_main(argv[1:])
