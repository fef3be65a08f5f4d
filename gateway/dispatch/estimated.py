"""What the placement believes of each worker's speeds and loads: its own measurements, and
estimates of what it never measured from what is known of it and of the farm
(`gateway.scheduler.estimates`), the same for the dispatcher's snapshots and the status page.

Recomputed only when some worker learned (its `lessons` moved, its speed book or load table was
replaced) or its card became known, so a dispatch round pays a comparison per worker.
"""

from __future__ import annotations

from collections.abc import Hashable

from gateway.dispatch.links import Links, WorkerLink
from gateway.learning import learn as learning
from gateway.scheduler.estimates import with_estimates
from gateway.scheduler.snapshot import WorkerView


def learned_view(link: WorkerLink) -> WorkerView:
    """The worker's own measurements as a view: speeds, fixed and load seconds, its card."""
    speed, fixed_s = learning.speed_views(link.speed_book)
    return WorkerView(
        name=link.name,
        speed=speed,
        fixed_s=fixed_s,
        load_s=dict(link.load_s),
        card=link.card,
    )


class FarmEstimates:
    """The learned view of every worker of `links`, estimates filled in."""

    def __init__(self, links: Links):
        self.links = links
        self._key: tuple[Hashable, ...] | None = None
        self._views: dict[str, WorkerView] = {}

    def of(self, link: WorkerLink) -> WorkerView:
        """The worker's measurements, and estimates of what it never measured (`estimated`,
        `estimated_load` name them)."""
        # The mappings themselves, not copies: the same object compares equal at once, and a
        # replaced one is compared by value.
        key = tuple((ln.name, ln.lessons, ln.card, ln.speed_book, ln.load_s) for ln in self.links)
        if key != self._key or link.name not in self._views:
            views = with_estimates([learned_view(ln) for ln in self.links])
            self._views = {view.name: view for view in views}
            self._key = key
        return self._views.get(link.name) or learned_view(link)
