"""The host's page cache, as the emulator models it: the model files read from disk since, so
that reading one again is a page-cache read.

A real host has one page cache for all its processes: two ComfyUI instances on one machine
read a checkpoint from disk once between them. Each emulator keeps its own reads (`set`)
unless its supervisor gives the emulators of one host a shared folder (`--page-cache`):
`SharedPageCache` marks each file read there, so a file one instance read is cached for all.
Capacity is not modelled (the host's RAM is taken to hold every model file read).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol


class PageCache(Protocol):
    """The names of the model files in the page cache."""

    def __contains__(self, name: object, /) -> bool: ...

    def add(self, name: str, /) -> None: ...


class SharedPageCache:
    """A page cache shared through `folder` by the emulators of one host: one empty marker
    file per model file read (named by a hash: model names may hold folders)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._known: set[str] = set()
        """Names seen cached here: a file never leaves the page cache."""

    def __contains__(self, name: object, /) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._known and self._marker(name).exists():
            self._known.add(name)
        return name in self._known

    def add(self, name: str, /) -> None:
        if name not in self._known:
            self._marker(name).touch()
            self._known.add(name)

    def _marker(self, name: str) -> Path:
        return self.folder / hashlib.sha256(name.encode()).hexdigest()[:32]
