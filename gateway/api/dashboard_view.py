"""What the dashboard page (`/gateway/`) shows, as one JSON snapshot: the workers, the queue by
model, the latest jobs and this node's recent finishes for its charts.

Built from what the other routes already serve (`/gateway/workers`, the queue's group index,
history's gateway block) and from `Metrics.recent`; a few small Redis reads, never a scan of
the jobs, so it can be sent to a page every second.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from gateway.farm.node import Farm
from gateway.jobs.history import gateway_block
from gateway.jobs.store import JobStore
from gateway.metrics.recorded import Finish

RECENT_JOBS = 12
SERIES_S = 15 * 60
"""The charts cover this many seconds back."""


async def snapshot(farm: Farm, store: JobStore) -> dict[str, Any]:
    now_ms = store.now_ms()
    return {
        "now_ms": now_ms,
        "node": farm.node,
        "workers": await farm.registry.records(),
        "queue": await queue_by_model(store),
        "recent": await recent_jobs(farm, store),
        "finishes": finishes(farm.metrics.recent, now_ms),
    }


async def queue_by_model(store: JobStore) -> list[dict[str, Any]]:
    """Waiting jobs per checkpoint, most first."""
    counts: Counter[str] = Counter()
    for job, count in await store.index.waiting_by_class():
        counts[job.checkpoint or "(no checkpoint)"] += count
    return [{"model": model, "jobs": jobs} for model, jobs in counts.most_common()]


async def recent_jobs(farm: Farm, store: JobStore) -> list[dict[str, Any]]:
    """The latest finished jobs, newest first, each as history's gateway block (with its phase
    ledger, once jobs carry one: the page draws its phases) and its checkpoint."""
    ids = list(reversed(await store.history_ids(-RECENT_JOBS, -1)))
    groups = farm.groups()
    jobs = []
    for record in await store.get_many(ids):
        block = gateway_block(record, await store.attempts(record.job_id), groups)
        block.pop("attempt_log", None)
        block.update(prompt_id=record.job_id, checkpoint=record.placement.checkpoint)
        jobs.append(block)
    return jobs


def finishes(recent: Iterable[Finish], now_ms: int) -> list[list[Any]]:
    """This node's finishes of the last `SERIES_S`: [finished_at_ms, outcome, total_s,
    queue_s, execution_s], oldest first."""
    since_ms = now_ms - SERIES_S * 1000
    return [
        [f.finished_at_ms, f.outcome, f.seconds.total_s, f.seconds.queue_s, f.seconds.execution_s]
        for f in recent
        if f.finished_at_ms >= since_ms
    ]
