"""The web frontend the gateway serves at `/`: ComfyUI's own, from a folder of static files.

As ComfyUI finds it: `--front-end-root DIR`, else the `static` folder of the
`comfyui-frontend-package` wheel (a dependency of the gateway). The workers' own frontends are
never used: a worker serves one instance's editor, the gateway's queues to the whole farm.
"""

from __future__ import annotations

import importlib.resources
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PACKAGE = "comfyui_frontend_package"


@dataclass(frozen=True)
class WebRoot:
    """A folder of static files, `index.html` at its top."""

    path: Path

    @property
    def index(self) -> Path:
        return self.path / "index.html"

    def file(self, url_path: str) -> Path | None:
        """The file a GET of `url_path` serves, if it exists inside the folder (its real
        path, links resolved, must stay inside)."""
        relative = url_path.lstrip("/")
        if not relative:
            return None
        candidate = (self.path / relative).resolve()
        if not candidate.is_relative_to(self.path) or not candidate.is_file():
            return None
        return candidate

    def extensions(self) -> list[str]:
        """The frontend's own extension scripts, as ComfyUI's `GET /extensions` lists them."""
        folder = self.path / "extensions"
        scripts = sorted(folder.rglob("*.js")) if folder.is_dir() else []
        return ["/" + script.relative_to(self.path).as_posix() for script in scripts]


def find_web_root(configured: Path | None) -> WebRoot | None:
    """The configured folder, else the installed frontend package's; None without either."""
    if configured is not None:
        if not (configured / "index.html").is_file():
            log.warning("front_end_root %s has no index.html: no web frontend", configured)
            return None
        return WebRoot(configured.resolve())
    try:
        static = importlib.resources.files(PACKAGE) / "static"
    except ModuleNotFoundError:
        log.info("no web frontend: %s is not installed and no front_end_root is set", PACKAGE)
        return None
    root = Path(str(static))
    return WebRoot(root.resolve()) if (root / "index.html").is_file() else None
