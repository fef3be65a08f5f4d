"""Arrivals settle before the policy is asked: a burst is placed seeing the whole burst.

A client sends a burst one `POST /prompt` at a time (ComfyUI's own script examples, and every
client measured: 4-13 ms between two prompts on loopback). Asked at the first prompt, the
policy places it seeing nothing of the rest, and on an idle farm that job is already running
when the rest arrive. The quick start's four mixed jobs on two idle workers (`bench.quickstart`,
live, 3 seeds) took 20.8 s placed one prompt at a time and 19.6 s settled (`swarm_like` 21.0);
simulated over 8 seeds, 20.8 s and 19.2 s. So after a job arrives the dispatcher waits until no
other has arrived for `SETTLE_S`, and asks the policy then.

The guarantee (tests/unit/gateway/scheduler/test_settle.py, and the dispatcher's and the
simulator's tests): no job is shown to the policy more than `SETTLE_CAP_S` later than it would
be without settling, however fast jobs keep arriving; a lone job, `SETTLE_S` later. Jobs that
arrive less than `SETTLE_S` apart, within that cap, are shown to one decision. A prompt
that may overtake others (a priority, `front`, an explicit number) is placed at once, as
before. The seconds are the clients' (wall) seconds: how fast a client posts does not depend
on the cards, so an emulated farm at a time scale settles as long, by the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass

SETTLE_S = 0.02
"""A burst has ended when no job arrived for this long: above the 4-13 ms a client takes to
post its next prompt, a few percent of the shortest real job (0.7 s, an SD1.5 image at 512 px
on an H200)."""
SETTLE_CAP_S = 0.05
"""However fast jobs keep arriving, the policy is asked this long after the first of them: a
stream of prompts is placed in rounds, none held back longer than this. Enough for a burst of
4-8 prompts to be seen whole; a burst of 16 is seen in two or three rounds, which its makespan
does not notice (simulated, 8 seeds: 34.9 s at 50 ms, 35.1 s at 100 ms, 35.3 s not settled)."""


@dataclass(frozen=True)
class Settling:
    """The arrivals not yet shown to the policy: when the first and the latest arrived."""

    first_s: float
    latest_s: float

    def until_s(self, gap_s: float = SETTLE_S, cap_s: float = SETTLE_CAP_S) -> float:
        """When to ask the policy, unless another job arrives before."""
        return min(self.latest_s + gap_s, self.first_s + cap_s)


def arrived(settling: Settling | None, at_s: float) -> Settling:
    """`settling` with a job arrived at `at_s` (the first of a new burst if None)."""
    if settling is None:
        return Settling(at_s, at_s)
    return Settling(settling.first_s, max(at_s, settling.latest_s))
