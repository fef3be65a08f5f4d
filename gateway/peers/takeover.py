"""The jobs of a node that lapsed go back to the queue, each exactly once.

A node whose registration expired (`gateway.peers.registry`) can settle nothing more: every
job its workers held is requeued by whichever live node sees it first, in one script
(`scripts.TAKE_OVER`) fenced by the job's attempt and by the owner's key, so of several nodes
trying at once one succeeds, and none does once the node is back or a new node owns the
worker (they settle it themselves, asking the worker). A job that was running counts a failed
attempt: a prompt that kills its node is not retried forever.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from gateway.dispatch.outcomes import Outcomes
from gateway.jobs.models import HELD, JobState
from gateway.jobs.store import JobStore
from gateway.peers.registry import Registry

log = logging.getLogger(__name__)

OUTCOME = "its gateway node lapsed"


async def take_over(
    store: JobStore,
    outcomes: Outcomes,
    registry: Registry,
    lapsed: Collection[str],
    mine: Collection[str],
) -> int:
    """Requeue what the workers of the `lapsed` nodes held (never those in `mine`, this node's
    own); forget lapsed nodes that own no worker any more. Returns how many were requeued."""
    if not lapsed:
        return 0
    owners = await registry.owners()
    gone = set(lapsed)
    requeued = 0
    for worker, node in sorted(owners.items()):
        if node in gone and worker not in mine:
            requeued += await _worker(store, outcomes, worker, node)
    for node in gone - set(owners.values()):
        await registry.forget(node)
    return requeued


async def _worker(store: JobStore, outcomes: Outcomes, worker: str, node: str) -> int:
    requeued = 0
    for job in await store.get_many(sorted(await store.worker_job_ids(worker))):
        if job.state not in HELD or job.worker != worker:
            continue
        result = await outcomes.requeue(
            worker,
            job,
            failed=job.state is JobState.RUNNING,
            outcome=OUTCOME,
            link=None,
            owner_lapsed=True,
        )
        if result:
            log.warning("job %s of %s taken over: node %s lapsed", job.job_id, worker, node)
            requeued += 1
    return requeued
