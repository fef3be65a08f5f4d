"""Liveness with a fake probe and clock: out of the ready set at the first unanswered probe,
back at the first answer, hung (once per episode) only while holding jobs past the limit
with no event heard of them either."""

from __future__ import annotations

import pytest

from gateway.dispatch.links import Held, Links, WorkerLink, WorkerState
from gateway.recovery.liveness import Liveness, LivenessSettings
from workers.client import ComfyClient
from workers.supervision.launch import WorkerHandle, WorkerSpec

SETTINGS = LivenessSettings(interval_s=1.0, timeout_s=2.0, hang_after_s=10.0)


class Fake:
    def __init__(self) -> None:
        self.now_s = 100.0
        self.answers = True
        self.hung: list[tuple[str, str]] = []
        self.changes = 0

    async def probe(self, link: WorkerLink, timeout_s: float) -> bool:
        return self.answers

    async def on_hung(self, link: WorkerLink, reason: str) -> None:
        self.hung.append((link.name, reason))

    def changed(self) -> None:
        self.changes += 1


def ready_link() -> WorkerLink:
    handle = WorkerHandle(WorkerSpec("w0", emulate="rtx4070ti"), "http://127.0.0.1:9", ready=True)
    return WorkerLink(handle, ComfyClient(handle.url), sid="s", state=WorkerState.READY)


def liveness_of(link: WorkerLink, fake: Fake) -> Liveness:
    return Liveness(
        Links([link]), fake.on_hung, SETTINGS, on_change=fake.changed, probe=fake.probe,
        clock=lambda: fake.now_s,
    )  # fmt: skip


async def test_an_unanswered_probe_takes_a_worker_out_of_the_ready_set_and_an_answer_back() -> None:
    link, fake = ready_link(), Fake()
    liveness = liveness_of(link, fake)
    fake.answers = False
    await liveness.check(link)
    assert (link.accepting, Links([link]).ready(), fake.changes) == (False, [], 1)
    fake.answers = True
    await liveness.check(link)
    assert (link.accepting, Links([link]).ready(), fake.changes) == (True, [link], 2)


@pytest.mark.parametrize(
    ("holds", "silent_s", "hung"),
    [
        (True, 7.9, False),  # 2 s of timeout + 7.9 s: under the 10 s limit
        (True, 8.0, True),
        (False, 60.0, False),  # an idle hung worker is only kept out of the ready set
    ],
)
async def test_a_worker_holding_jobs_is_hung_past_the_limit(
    holds: bool, silent_s: float, hung: bool
) -> None:
    link, fake = ready_link(), Fake()
    if holds:  # sent, and last heard of, as the first probe started
        sent_s = fake.now_s - SETTINGS.timeout_s
        link.hold("j1", Held(attempt=1, client_id=None, sent_at_s=sent_s))
    liveness = liveness_of(link, fake)
    fake.answers = False
    await liveness.check(link)
    fake.now_s += silent_s
    await liveness.check(link)
    await liveness.check(link)  # reported once per episode
    assert [name for name, _ in fake.hung] == (["w0"] if hung else [])


async def test_a_worker_not_connected_is_not_probed_and_counts_as_answering() -> None:
    link, fake = ready_link(), Fake()
    liveness = liveness_of(link, fake)
    fake.answers = False
    await liveness.check(link)
    link.state = WorkerState.LOST  # its process exited: the supervisor restarts it
    await liveness.check(link)
    assert link.responsive


async def test_a_worker_whose_events_still_arrive_is_not_hung() -> None:
    link, fake = ready_link(), Fake()
    link.hold("j1", Held(attempt=1, client_id=None, sent_at_s=fake.now_s))
    liveness = liveness_of(link, fake)
    fake.answers = False
    await liveness.check(link)
    fake.now_s += 30.0
    link.last_progress_s = fake.now_s - 1.0  # a progress event a second ago
    await liveness.check(link)
    assert (fake.hung, link.accepting) == ([], False)
