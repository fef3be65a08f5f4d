"""`comfy-gateway ab report NAME`: an experiment's report as a table, with a PNG plot of the
per-phase distributions per group; `--watch` follows it while jobs arrive."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gateway.ledger.plot import NoPlotting, phase_boxes
from gateway.ledger.record import PHASES
from gateway.ledger.remote import DEFAULT_URL, Gateway, RemoteError, probe_quality

POLL_S = 2.0


def watch(gateway: Gateway, name: str, timeout_s: float) -> dict[str, Any]:
    """Poll the report until its verdict calls a winner or `timeout_s` passed."""
    report = gateway.report(name)
    deadline = time.monotonic() + timeout_s
    with tqdm(desc=f"jobs of {name}", unit="job", initial=report["jobs"]) as bar:
        while "is faster" not in report["verdict"] and time.monotonic() < deadline:
            time.sleep(POLL_S)
            report = gateway.report(name)
            bar.update(report["jobs"] - bar.n)
            bar.set_postfix_str(report["verdict"][:60])
    return report


def quality_table(judged: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per group: its images against the baseline's for the same workflow and seed."""
    rows = [["group", "images", "size", "PSNR dB", "black share", "images"]]
    for group, verdict in judged.items():
        images = verdict["images"]
        first = images[0] if images else {}
        rows.append(
            [
                group,
                str(len(images)),
                "x".join(map(str, first.get("size", []))) or "-",
                _p(first.get("psnr_db")),
                _p(first.get("black_share")),
                "sound" if verdict["sound"] else f"BROKEN: {verdict['reason']}",
            ]
        )
    return "\n".join(_aligned(rows))


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
    parser.add_argument(
        "--quality",
        action="store_true",
        help="run the baseline's latest workflow, same seed, on every group; compare images",
    )
    args = parser.parse_args(argv)
    try:
        with Gateway(args.url, args.token) as gateway:
            report = (
                watch(gateway, args.name, args.watch) if args.watch else gateway.report(args.name)
            )
            print(table(report))
            if args.quality:
                print()
                print(_quality(gateway, report))
    except RemoteError as exc:
        print(f"comfy-gateway ab: {exc}", file=sys.stderr)
        return 1
    if not args.no_plot:
        _plot(report, args.plot or Path(f"{args.name}.png"))
    return 0


def _quality(gateway: Gateway, report: Mapping[str, Any]) -> str:
    groups = report["experiment"]["groups"]
    ran = [t for t in report.get("job_times", []) if t.get("group") == groups[0]]
    if not ran or not ran[-1].get("job_id"):
        return "quality: no job of the baseline group to repeat yet"
    prompt = gateway.prompt_of(ran[-1]["job_id"])
    return "quality (the same workflow and seed on each group):\n" + quality_table(
        probe_quality(gateway, prompt, groups)
    )


def _plot(report: Mapping[str, Any], out: Path) -> None:
    groups = report["experiment"]["groups"]
    try:
        phase_boxes(report["verdict"], report.get("job_times", []), groups, out)
    except NoPlotting as exc:
        print(f"no plot: {exc}", file=sys.stderr)
        return
    print(f"plot: {out}")


def main(argv: Sequence[str]) -> int:
    """`comfy-gateway ab SUBCOMMAND`."""
    if not argv or argv[0] != "report":
        print(
            "usage: comfy-gateway ab report NAME [--url URL] [--token T] [--plot FILE] "
            "[--watch S] [--quality]",
            file=sys.stderr,
        )
        return 2
    return report_main(argv[1:])
