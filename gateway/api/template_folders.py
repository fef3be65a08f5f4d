"""The workflow templates the web frontend offers: the files of the comfyui-workflow-templates
packages installed beside the gateway, found as ComfyUI finds them.

ComfyUI serves `/templates/` as static files of that package: its one `templates` folder up
to 0.1.x (ComfyUI 0.3.64), or, since the package was split into bundles
(`comfyui_workflow_templates_json`, `_media_image`, ...), every bundle's own `templates` folder
(`get_asset_path` resolves a file to `<bundle>/templates/<file>`). All of them together are
some 500 MB, so the gateway does not depend on them: `pip install comfyui-workflow-templates`
beside it to offer them.
"""

from __future__ import annotations

import importlib.util
import logging
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PACKAGE_PREFIX = "comfyui_workflow_templates"
INDEX_RE = re.compile(r"^index(\.[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?)?\.json$")
"""The template lists the frontend reads first: `index.json` and one per locale
(`index.pt-BR.json`)."""
LOGO_INDEX = "index_logo.json"
"""Which logo each provider of templates has, read beside them."""


@dataclass(frozen=True)
class TemplateFolders:
    """The `templates` folders of the installed packages, in name order."""

    folders: tuple[Path, ...]

    def file(self, relative: str) -> Path | None:
        """The first folder's file at `relative` (real path inside that folder), if any."""
        for folder in self.folders:
            candidate = (folder / relative).resolve()
            if candidate.is_relative_to(folder) and candidate.is_file():
                return candidate
        return None


def empty_index(relative: str) -> list[Any] | dict[str, Any] | None:
    """What an empty template set holds at `relative`: an empty list for a template index,
    an empty map for the logo index; None for any other file (a template, a thumbnail)."""
    if relative == LOGO_INDEX:
        return {}
    return [] if INDEX_RE.match(relative) else None


def find_template_folders() -> TemplateFolders:
    """Every installed template package's `templates` folder (none: no templates offered)."""
    names = sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith(PACKAGE_PREFIX))
    folders = tuple(f for f in (_templates_folder(name) for name in names) if f is not None)
    if not folders:
        log.info(
            "no workflow template package: the workers' templates are served "
            "(pip install comfyui-workflow-templates to serve the package's)"
        )
    return TemplateFolders(folders)


def _templates_folder(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "templates"
        if folder.is_dir():
            return folder.resolve()
    return None
