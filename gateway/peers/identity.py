"""This node's name: kept in its data dir, so a restarted gateway is the same node.

A gateway restarted on its data dir (which one gateway holds at a time, `data_dir_lock`)
renews the registration it had instead of waiting for it to lapse, and the other nodes never
take over the jobs its workers still run.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

FILE = "node-name"


def node_name(data_dir: Path) -> str:
    """The name stored in `data_dir`, or a new one (this host's name and a random suffix),
    stored there for the next start."""
    path = data_dir / FILE
    try:
        name = path.read_text().strip()
    except FileNotFoundError:
        name = ""
    if name:
        return name
    name = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(name + "\n")
    return name
