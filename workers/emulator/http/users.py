"""The single user's data directory as ComfyUI's UserManager sees it (without --multi-user).

The emulator stores no settings and no user files; it keeps one fact: whether
`<user directory>/default` exists. `GET /users` reports that as `migrated`, and ComfyUI creates
the folder as a side effect of resolving a path in it (any settings read, a `/userdata`
listing of anything but the user folder itself); a fresh user directory starts without it.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

# Where the user's folder would be; only the shape of paths under it matters.
USER_ROOT = "/user/default"


class UserDir:
    """Whether the user's folder exists yet, and ComfyUI's answers about folders in it."""

    def __init__(self) -> None:
        self.migrated = False

    def read_settings(self) -> None:
        """Reading `comfy.settings.json` makes its folder first."""
        self.migrated = True

    def list_status(self, directory: str) -> int:
        """The status of `GET /userdata?dir=`: 400 without a folder, 403 for one outside the
        user's, 200 (an empty list) for the user folder once made, else 404."""
        if not directory:
            return 400
        if "%" in directory:
            directory = unquote(directory)
        path = posixpath.normpath(posixpath.join(USER_ROOT, directory))
        if posixpath.commonpath((USER_ROOT, path)) != USER_ROOT:
            return 403
        if path == USER_ROOT:
            return 200 if self.migrated else 404
        self.migrated = True  # the parent folder of `path` is made before the existence check
        return 404
