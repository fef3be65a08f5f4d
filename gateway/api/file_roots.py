"""The folders the gateway's workers serve files from, and the real-path check `/view` makes.

ComfyUI joins the folder, subfolder and name and serves whatever that path opens, so a
symlink planted in an output or input folder serves any file the worker can read. The
gateway resolves the path itself, links included, and refuses one that lands outside its
folder (ComfyUI's answer for a path leaving the folder: a bare 403). Only folders on this
host that the gateway laid out are known; a worker given by URL checks for itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileRoots:
    """The shared input folder and the root of the workers' own folders (`FarmLayout`)."""

    input_dir: Path | None = None
    worker_root: Path | None = None

    def folder(self, kind: str, worker: str) -> Path | None:
        """Where a file of this `type` lives for this worker, when the gateway knows it."""
        if kind == "input":
            return self.input_dir
        if self.worker_root is None:
            return None
        if kind == "output":
            return self.worker_root / worker / "output"
        return self.worker_root / worker / "tmp" / "temp"

    def escapes(self, kind: str, worker: str, subfolder: str, filename: str) -> bool:
        """True when the file exists here and its real path is outside its folder."""
        root = self.folder(kind, worker)
        if root is None:
            return False
        path = root / subfolder / Path(filename).name  # ComfyUI takes the basename
        if not path.exists() and not path.is_symlink():
            return False
        return not path.resolve().is_relative_to(root.resolve())
