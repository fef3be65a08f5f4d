"""The decision-cost table (Markdown) and plot (PNG), each headed by the command that made it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.decision.snapshots import (
    BURST_SPAN_S,
    SLOTS,
    STEADY_SPAN_S,
    TARGETS_MS,
    ZIPF_S,
    Size,
)
from bench.decision.timing import POLICIES, Budget, Row
from bench.machine import describe as machine
from gateway.scheduler import queue


def fmt_ms(value: float, cut: bool = False) -> str:
    """Milliseconds to three or four significant figures; `>` where the one call was cut at
    the cap (a lower bound)."""
    text = f"{value:.3f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:,.0f}"
    return ">" + text if cut else text


def cpu_cell(row: Row) -> str:
    return f"{fmt_ms(row.cpu_pct_ms(50), row.cut)} / {fmt_ms(row.cpu_pct_ms(99), row.cut)}"


def wall_cell(row: Row) -> str:
    p50, p99, most = row.pct_ms(50), row.pct_ms(99), max(row.samples_ms)
    spread = " / ".join(fmt_ms(value, row.cut) for value in (p50, p99, most))
    return f"{spread} ({len(row.samples_ms)})"


def per_assignment_cell(row: Row) -> str:
    """How many assignments one call made, and its CPU p50 shared among them."""
    return f"{row.placed} / {fmt_ms(row.cpu_pct_ms(50) / max(row.placed, 1), row.cut)}"


def gap_cell(row: Row) -> str:
    """CPU milliseconds per assignment as the dispatcher sends them: p50 / p99 between two
    assignments, and the p99 to a call's first one."""
    p50, p99, first = row.gap_pct_ms(50), row.gap_pct_ms(99), row.first_pct_ms(99)
    if p50 is None or p99 is None or first is None:
        return "-"
    return f"{fmt_ms(p50)} / {fmt_ms(p99)} ({fmt_ms(first)})"


def target_cell(case: str, size: Size, rows: Sequence[Row]) -> str:
    """The target judged on the CPU p99 per assignment (a decision: one job placed, sent as
    it is made) and, beside it, on the whole call's."""
    target = TARGETS_MS.get(size)
    ours = [r for r in rows if r.policy == POLICIES[0]]
    if target is None or not ours:
        return ""
    row = ours[0]
    per_call = not row.cut and row.cpu_pct_ms(99) <= target
    gap = row.gap_pct_ms(99)
    per_assignment = not row.cut and gap is not None and gap <= target
    verdict = {True: "met", False: "**missed**"}
    return (
        f"<= {target:g} ms: per assignment {verdict[per_assignment]}, per call {verdict[per_call]}"
    )


def table(rows: Sequence[Row]) -> str:
    """One line per case and size: the first policy's CPU and wall-clock times, the others'
    CPU times, and whether the first policy's CPU p99 meets its target."""
    policies = list(dict.fromkeys(r.policy for r in rows))
    ours, others = policies[0], policies[1:]
    header = ["case", "jobs x workers x models", "groups", "shown jobs"]
    header += [f"{ours} CPU p50 / p99 ms", f"{ours} wall p50 / p99 / max ms (calls)"]
    header += [f"{ours} assignments / CPU p50 ms each"]
    header += [f"{ours} CPU per assignment p50 / p99 ms (to the first, p99)"]
    header += [f"{p} CPU p50 / p99 ms" for p in others] + [f"{ours} CPU p99 target"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    keyed = {
        (r.case, r.size): [x for x in rows if (x.case, x.size) == (r.case, r.size)] for r in rows
    }
    for (case, size), group in keyed.items():
        by_policy = {r.policy: r for r in group}
        mine = by_policy.get(ours)
        cells = (
            [cpu_cell(mine), wall_cell(mine), per_assignment_cell(mine), gap_cell(mine)]
            if mine
            else ["-"] * 4
        )
        cells += [cpu_cell(by_policy[p]) if p in by_policy else "-" for p in others]
        first = group[0]
        body = [case, size.label, str(first.groups), f"{first.shown:,}", *cells]
        lines.append("| " + " | ".join([*body, target_cell(case, size, group)]) + " |")
    return "\n".join(lines)


def plot(rows: Sequence[Row], path: Path, command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r.case for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(6.5 * len(cases), 5), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        of_case = [r for r in rows if r.case == case]
        sizes = list(dict.fromkeys(r.size for r in of_case))
        for name in dict.fromkeys(r.policy for r in of_case):
            mine = {r.size: r for r in of_case if r.policy == name}
            xs = [i for i, size in enumerate(sizes) if size in mine]
            ys = [mine[sizes[i]].cpu_pct_ms(99) for i in xs]
            style = {"linewidth": 2.5, "color": "black"} if name == POLICIES[0] else {}
            ax.plot(xs, ys, marker="o", label=f"{name} CPU", **style)
            if name == POLICIES[0]:
                walls = [mine[sizes[i]].pct_ms(99) for i in xs]
                ax.plot(xs, walls, linestyle="--", color="gray", label=f"{name} wall clock")
                gaps = [(i, mine[sizes[i]].gap_pct_ms(99)) for i in xs]
                shown = [(i, gap) for i, gap in gaps if gap is not None]
                if shown:
                    gx, gy = zip(*shown, strict=True)
                    ax.plot(gx, gy, linestyle=":", color="black", label=f"{name} per assignment")
        targets = [(i, TARGETS_MS[size]) for i, size in enumerate(sizes) if size in TARGETS_MS]
        if targets:
            tx, ty = zip(*targets, strict=True)
            ax.scatter(tx, ty, marker="_", s=400, color="red", label="affinity CPU p99 target")
        ax.set_xticks(range(len(sizes)), [size.label for size in sizes], rotation=60, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("CPU p99 ms per call (per assignment: dotted)")
        ax.set_title(f"{case}: jobs x workers x models", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.text(0.01, 0.005, command, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


NOTES = (
    "CPU: milliseconds of CPU time of the calling thread (`time.thread_time_ns`) during one "
    "`policy.assign(snapshot)` call, what the placement itself costs; a call of 256 groups x "
    "workers or more runs with the garbage collector's passes deferred until it ends, as the "
    "dispatcher runs it (`dispatcher.decisions`: a pass over a large snapshot takes 30-50 ms, "
    "whichever assignment it lands in). Wall: the same calls "
    "by the wall clock (`time.perf_counter_ns`), what a caller waits on this machine, "
    "where other processes share the cores and preempt the call "
    "(the load average above): on a loaded machine the wall p99 and max are mostly that "
    "preemption, kept beside the CPU figures as the honest picture. Each row: p50 / p99 "
    "(/ max) and how many calls were timed (after one untimed warm-up call unless it took "
    "{budget_s:g} s or more; at least {min_reps} calls or {budget_s:g} s of calls, at most "
    "{max_reps}, and none started that "
    "would end past {cap_s:g} s; with fewer than 100 calls the p99 is the max; `>`: one call cut "
    "at {cap_s:g} s, a lower bound). Groups: "
    "`queue.group_jobs` of the waiting jobs; shown jobs: their heads (`queue.heads_in_order`, "
    "at most {head} per group), the snapshot's `jobs`. Assignments: how many one call made "
    "(a burst fills every free slot of the farm in one call; the steady state, one), and its "
    "CPU p50 shared among them. Per assignment: the call timed as its steps (what `assign` "
    "is), the CPU time from one assignment to the next (the first: from the call's start), "
    "over every timed call; the dispatcher claims and sends each assignment as it is made "
    "(`dispatcher.decisions`), so this is what a job of a burst waits on once the one before "
    "it is placed, and the targets are judged on its p99 (a decision: one job placed) and, "
    "beside it, on the whole call's.",
    "Workers: h200, rtx4070ti, h200 with `--cache-lru 8`, rtx4070ti, in turn; speeds fitted to "
    "the emulator's cost model, load seconds from the page cache for what a worker holds and "
    "from disk for the rest; a Zipf({zipf:g}) catalogue of SD1.5 and SDXL checkpoints. Burst: "
    "every job arrived within the last {burst:g} s, every worker idle with {slots} free slots, "
    "holding as many checkpoints as its cache keeps (one on every card: `--cache-lru 8` keeps "
    "one, `gateway.learning.learn.cache_slots`). Steady: the jobs arrived over the last "
    "{steady:g} s; one worker has just finished a job and started its prefetched one (one free "
    "slot), every other runs one job and holds one prefetched (no free slot). Every policy gets "
    "the same snapshot ({slots} slots per worker; `ect_greedy` binds early in the simulator, "
    "here it is timed as if late).",
)


def write(rows: Sequence[Row], out: Path, command: str, budget: Budget) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    notes = [
        note.format(
            min_reps=budget.min_reps,
            budget_s=budget.budget_s,
            max_reps=budget.max_reps,
            cap_s=budget.cap_s,
            head=queue.HEAD_JOBS,
            zipf=ZIPF_S,
            burst=BURST_SPAN_S,
            steady=STEADY_SPAN_S,
            slots=SLOTS,
        )
        for note in NOTES
    ]
    text = (
        "# Decision cost\n\n"
        f"Made by `{command}` on {machine()}.\n\n"
        + table(rows)
        + "\n\n"
        + "\n\n".join(notes)
        + "\n"
    )
    path = out / "decision.md"
    path.write_text(text)
    plot(rows, out / "decision.png", command)
    return path
