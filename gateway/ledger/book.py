"""The ledger of each job that ends on a worker of this node, as `Outcomes` records it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gateway.dispatch.links import Held, WorkerLink
from gateway.jobs.models import JobRecord
from gateway.ledger.record import Placed, Times, ledger


class LedgerBook:
    """Builds job ledgers and counts the jobs of each worker process (the first is cold)."""

    def __init__(self, now_ms: Any) -> None:
        self.now_ms = now_ms
        self._process_jobs: dict[str, tuple[object, int]] = {}

    def process_job(self, link: WorkerLink) -> int:
        """The ordinal of a new job among those of the worker's current process."""
        process = (link.handle.pid, link.handle.started_s)
        seen, count = self._process_jobs.get(link.name, (None, 0))
        count = count + 1 if seen == process else 1
        self._process_jobs[link.name] = (process, count)
        return count

    def of(
        self,
        link: WorkerLink,
        job: JobRecord,
        held: Held,
        prompt: Mapping[str, Any],
        entry: Mapping[str, Any],
        state: str,
    ) -> dict[str, Any]:
        """The job's ledger (`gateway.ledger.record.ledger`)."""
        clock = held.clock
        placed = Placed(
            worker=link.name,
            group=link.group,
            args=link.handle.spec.args,
            attempt=held.attempt,
            process_job=self.process_job(link),
            experiment=job.placement.experiment,
        )
        times = Times(
            job_id=job.job_id,
            enqueued_at_ms=job.enqueued_at_ms,
            claimed_at_ms=job.claimed_at_ms,
            finished_at_ms=self.now_ms(),
            dispatch_s=None if clock is None else max(clock.started_s - held.sent_at_s, 0.0),
        )
        return ledger(
            prompt,
            job.prompt_json,
            clock,
            placed,
            times,
            checkpoint=job.placement.checkpoint,
            state=state,
            outputs=list(_files(entry)),
        )


def _files(entry: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The image files an entry lists (filename, subfolder, type)."""
    outputs = entry.get("outputs")
    if not isinstance(outputs, Mapping):
        return
    for output in outputs.values():
        images = output.get("images") if isinstance(output, Mapping) else None
        for item in images if isinstance(images, list) else []:
            if isinstance(item, Mapping) and "filename" in item:
                yield {k: item.get(k) for k in ("filename", "subfolder", "type")}
