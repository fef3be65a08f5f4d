"""Which checkpoint a cold worker warms up on while it sits idle.

A worker that has run nothing since its process started (no `preload`) pays the card's first
use on its first prompt: CUDA's first use and the kernels' warm-up, 2-5 s on real cards
(`bench/results/real_gpu.md`: a first job 4.1 s without preload, 0.8-1.3 s with). Whichever
client job reaches it first would pay that. So a cold worker that is idle, once the farm has
seen a job and no other has arrived for `policy.ASK_EVERY_S` (0.25 s of the cards: a client
posts a burst one prompt at a time, and the burst's next jobs, seen whole, may need the worker
more than a warm-up chosen on its first prompt alone), runs the warm-up that `preload` runs
(`workers.warmup.run.warm_up`) on a checkpoint clients ask for. Meanwhile it is busy as with
any job (`warm_up_job`): a job placed there queues behind the warm-up, as behind a job, and
finds the card's first use paid.

Each warm-up loads the checkpoint, among those the worker may run, that the fewest workers
hold (counting the warm-ups chosen before it), then the most wanted by recent arrivals: an
idle farm spreads what its clients use instead of warming every card on one. A worker being
tuned (`gateway.ledger.tune`, a group of its own) is never warmed up: the tuner measures its
cold runs. Nor (the dispatcher's rule) is one that shares its card with another worker: there
the warm-up's load runs beside the other's jobs on the same GPU and slows them far more than it
saves (two ComfyUI instances on one H100: the first job's load 4.3-4.6 s against 0.3-0.5 s,
for about 1 s of first use saved on the cold one).

The guarantee (tests/unit/gateway/scheduler/test_warming.py, tests/integration/test_warming.py,
tests/unit/bench/test_sim.py, tests/unit/gateway/dispatch/test_dispatcher.py): a cold worker
with a card of its own left idle for that pause after a job has arrived never makes a client
job pay its first use, and a job that queues behind a warm-up waits at most what the warm-up
costs beyond that first use: the load of its checkpoint, where the job needs another. A job
that arrives within the pause finds the worker as it would with no warm-ups (free, and cold).
One sent to a cold worker before it was ever idle still pays it.

The dispatcher and the simulator both call `warm_ups` and show the policy the warm-up as
`warm_up_job`, its seconds as the gateway estimates them, the card's first use included
(`gateway.learning.learn.outstanding_s`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.scheduler.cost import RESERVED_GROUP_PREFIX, can_run
from gateway.scheduler.snapshot import JobView, WorkerView
from workers.warmup.prompts import WARMUP_SIZE_PX


def warm_up_job(job: JobView, at_s: float) -> JobView:
    """The warm-up of `job`'s checkpoint as the policy sees it while it runs: a job of one
    step at 64x64 (its seconds are its load's) started at `at_s`."""
    assert job.checkpoint is not None
    return JobView(
        job_id=f"warm-up {job.checkpoint}",
        enqueued_at_s=at_s,
        model_keys=frozenset((job.checkpoint,)),
        checkpoint=job.checkpoint,
        family=job.family,
        work_units=WARMUP_SIZE_PX * WARMUP_SIZE_PX / 1e6,
    )


def warm_ups(
    cold: Sequence[WorkerView],
    farm: Sequence[WorkerView],
    latest: Mapping[str, JobView],
    rates: Mapping[str, float],
) -> list[tuple[str, str]]:
    """(worker, checkpoint) for each idle cold worker in `cold` that may run a checkpoint
    clients asked for. `farm`: every worker, to count who holds what; `latest`: the latest job
    seen per checkpoint (its eligibility and group say who may run it); `rates`: recent
    arrivals per model key (`gateway.learning.demand`)."""
    holders = {checkpoint: 0 for checkpoint in latest}
    for worker in farm:
        for key in worker.resident:
            if key in holders:
                holders[key] += 1
    chosen = []
    for worker in cold:
        if worker.group.startswith(RESERVED_GROUP_PREFIX):
            continue  # being tuned (`gateway.ledger.tune`): its cold runs are measured
        options = [c for c, job in latest.items() if can_run(job, worker)]
        if not options:
            continue
        checkpoint = min(options, key=lambda c: (holders[c], -rates.get(c, 0.0), c))
        holders[checkpoint] += 1
        chosen.append((worker.name, checkpoint))
    return chosen
