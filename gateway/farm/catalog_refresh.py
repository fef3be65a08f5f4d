"""Keeping the farm's catalogue (`FarmCatalog`) as current as the workers' own object_info.

A worker's object_info lists its files (checkpoints, LoRAs, input images), and those change
while it runs: a model copied in, an image uploaded. The catalogue is read again from a
worker when it connects or comes back from a restart and after an upload through it, from
every ready worker on a schedule, and when a prompt names a file no list has (before it is
refused). Refreshes of the whole farm asked for while one runs share it, and one asked for
within `min_interval_s` of the last is skipped, so a stream of prompts naming a missing file
costs the workers one object_info per interval, not one per prompt.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from gateway import tasks
from gateway.dispatch.links import Links, WorkerLink
from gateway.farm.catalog import FarmCatalog
from workers.client import WorkerError

log = logging.getLogger(__name__)


class CatalogRefresh:
    def __init__(
        self,
        links: Links,
        catalog: FarmCatalog,
        *,
        interval_s: float,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.links = links
        self.catalog = catalog
        self.interval_s = interval_s
        self.min_interval_s = min_interval_s
        self.clock = clock
        self.refreshes = 0
        """How many times the whole farm was asked (for tests and metrics)."""
        self._running: asyncio.Task[None] | None = None
        self._last_s: float | None = None

    async def worker(self, link: WorkerLink) -> None:
        """Read one worker's object_info again and rebuild the catalogue."""
        await self._fetch(link)
        self._rebuild()

    async def farm(self) -> None:
        """Read every ready worker's object_info again (shared while one runs)."""
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._farm(), name="catalog-refresh")
        await asyncio.shield(self._running)

    async def farm_unless_recent(self) -> bool:
        """`farm()` unless the last one ended within `min_interval_s`; whether it ran."""
        running = self._running is not None and not self._running.done()
        recent = self._last_s is not None and self.clock() - self._last_s < self.min_interval_s
        if recent and not running:
            return False
        await self.farm()
        return True

    async def run(self) -> None:
        """The scheduled refresh, every `interval_s`."""
        while True:
            await asyncio.sleep(self.interval_s)
            tasks.check_cancelled()
            await self.farm()

    async def _farm(self) -> None:
        await asyncio.gather(*(self._fetch(link) for link in self.links.ready()))
        self._rebuild()
        self.refreshes += 1
        self._last_s = self.clock()

    async def _fetch(self, link: WorkerLink) -> None:
        try:
            link.object_info = await link.client.object_info()
        except WorkerError as exc:
            log.warning("object_info of %s unavailable: %s", link.name, exc)

    def _rebuild(self) -> None:
        infos = {ln.name: ln.object_info for ln in self.links if ln.object_info is not None}
        self.catalog.update(infos)
