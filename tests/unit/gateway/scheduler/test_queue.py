"""The queue as groups: `QueueIndex`, kept job by job, always equals `group_jobs` of the jobs
it holds; class keys name what makes jobs interchangeable, and nothing else."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gateway.scheduler import queue
from gateway.scheduler.snapshot import JobGroup, JobView

CLASSES = {
    "one class": [JobView("", 0.0, checkpoint="a", model_keys=frozenset({"a"}))],
    "checkpoints": [
        JobView("", 0.0, checkpoint=c, model_keys=frozenset({c}), family=f)
        for c, f in [("a", "sd15"), ("b", "sd15"), ("c", "sdxl")]
    ],
    "groups and eligible sets": [
        JobView("", 0.0, checkpoint="a", model_keys=frozenset({"a", "l"}), group=g, eligible=e)
        for g in (None, "A")
        for e in (None, frozenset({"w1"}), frozenset({"w1", "w2"}))
    ],
}


def random_job(rng: random.Random, n: int, classes: list[JobView]) -> JobView:
    return replace(
        rng.choice(classes),
        job_id=f"j{n:04d}",
        enqueued_at_s=rng.uniform(0.0, 100.0),
        priority=rng.choice([0, 0, 0, 1, 3, -1]),
        work_units=rng.uniform(0.5, 30.0),
        score=float(rng.randint(-20, 200)),
    )


def assert_same(actual: tuple[JobGroup, ...], expected: tuple[JobGroup, ...]) -> None:
    assert [(g.key, g.head, g.count) for g in actual] == [
        (g.key, g.head, g.count) for g in expected
    ]
    for got, want in zip(actual, expected, strict=True):
        assert (got.oldest_s, got.newest_s, got.top_priority) == (
            want.oldest_s,
            want.newest_s,
            want.top_priority,
        )
        assert got.work_units == pytest.approx(want.work_units)
        assert got.enqueued_s_sum == pytest.approx(want.enqueued_s_sum)


@pytest.mark.parametrize("head", [1, 3, queue.HEAD_JOBS])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("classes", CLASSES)
def test_the_index_equals_the_grouped_jobs_after_every_add_and_remove(
    classes: str, seed: int, head: int
) -> None:
    rng = random.Random(f"{classes}/{seed}/{head}")
    index = queue.QueueIndex(head)
    waiting: dict[str, JobView] = {}
    for n in range(300):
        if waiting and rng.random() < 0.45:
            job_id = rng.choice(sorted(waiting))
            assert index.remove(job_id) == waiting.pop(job_id)
        else:
            job = random_job(rng, n, CLASSES[classes])
            index.add(job)
            waiting[job.job_id] = job
        assert len(index) == len(waiting)
        assert_same(index.groups(), queue.group_jobs(waiting.values(), head))


def test_adding_a_job_twice_or_removing_an_unknown_one_changes_nothing() -> None:
    index = queue.QueueIndex()
    job = JobView("j1", 5.0, checkpoint="a")
    index.add(job)
    index.add(job)
    assert index.remove("nope") is None
    assert [g.count for g in index.groups()] == [1]
    assert index.get("j1") == job and "j1" in index


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (
            JobView("x", 1.0, model_keys=frozenset({"a", "b"})),
            JobView("y", 9.0, model_keys=frozenset({"b", "a"})),
            True,
        ),
        (JobView("x", 1.0, priority=5, work_units=3.0), JobView("y", 2.0, priority=0), True),
        (JobView("x", 1.0, group="A"), JobView("y", 1.0, group="B"), False),
        (JobView("x", 1.0, eligible=frozenset({"w1"})), JobView("y", 1.0), False),
        (
            JobView("x", 1.0, checkpoint="a", family="sd15"),
            JobView("y", 1.0, checkpoint="a", family="sdxl"),
            False,
        ),
    ],
)
def test_class_keys_tell_apart_only_what_placement_tells_apart(
    one: JobView, other: JobView, same: bool
) -> None:
    assert (queue.class_key(one) == queue.class_key(other)) is same


@pytest.mark.parametrize("classes", CLASSES)
def test_a_class_template_has_the_class_it_was_made_from(classes: str) -> None:
    for job in CLASSES[classes]:
        key = queue.class_key(job)
        assert queue.class_key(queue.class_template(key)) == key


def test_heads_in_order_walks_every_shown_job_in_queue_order() -> None:
    rng = random.Random(11)
    jobs = [random_job(rng, n, CLASSES["checkpoints"]) for n in range(50)]
    groups = queue.group_jobs(jobs, head=4)
    walked = queue.heads_in_order(groups)
    assert len(walked) == sum(len(g.head) for g in groups)
    assert list(walked) == sorted(walked, key=queue.queue_order)
    assert [g.first for g in groups] == sorted((g.first for g in groups), key=queue.queue_order)


def test_summed_waiting_is_counted_from_the_arrivals() -> None:
    group = queue.group_jobs([JobView("a", 10.0), JobView("b", 30.0)])[0]
    assert group.waited_s(40.0) == pytest.approx(40.0)
    assert group.waited_s(0.0) == 0.0
