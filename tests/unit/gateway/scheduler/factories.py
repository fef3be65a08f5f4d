"""Small snapshots for table-driven policy tests."""

from __future__ import annotations

from gateway.scheduler.snapshot import JobView, Snapshot, WorkerView

SPEED = {"sd15": 10.0, "sdxl": 10.0}


def job(
    job_id: str,
    model: str,
    at_s: float = 0.0,
    family: str = "sd15",
    work: float = 10.0,
    **kw: object,
) -> JobView:
    fields: dict[str, object] = {"model_keys": frozenset((model,)), **kw}
    return JobView(
        job_id=job_id,
        enqueued_at_s=at_s,
        checkpoint=model,
        family=family,
        work_units=work,
        **fields,  # type: ignore[arg-type]
    )


def worker(
    name: str,
    resident: tuple[str, ...] = (),
    free: int = 1,
    speed: float = 10.0,
    load_s: float = 4.0,
    **kw: object,
) -> WorkerView:
    fields: dict[str, object] = {"idle_since_s": 0.0, **kw}
    return WorkerView(
        name=name,
        free_slots=free,
        resident=resident,
        speed={"sd15": speed, "sdxl": speed},
        load_s={"sd15": load_s, "sdxl": load_s},
        **fields,  # type: ignore[arg-type]
    )


def snap(now_s: float, jobs: list[JobView], workers: list[WorkerView], **kw: object) -> Snapshot:
    return Snapshot(now_s=now_s, jobs=tuple(jobs), workers=tuple(workers), **kw)  # type: ignore[arg-type]
