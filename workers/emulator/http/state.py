"""One emulated instance's state: what the app factory builds and every route reaches.

Apart from the factory (`workers.emulator.http.app`), so that the routes can name it without
importing the module that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.emulator.catalog import NodeCatalog
from workers.emulator.config import EmulatorConfig
from workers.emulator.execution.engine import Engine
from workers.emulator.execution.promptqueue import PromptQueue
from workers.emulator.faults import Faults
from workers.emulator.files import Dirs
from workers.emulator.http.logring import LogRing
from workers.emulator.http.users import UserDir
from workers.emulator.http.ws import SocketHub


@dataclass
class Emulator:
    """Everything one emulated instance holds; routes reach it as `app.state.emulator`."""

    config: EmulatorConfig
    dirs: Dirs
    catalog: NodeCatalog
    queue: PromptQueue
    hub: SocketHub
    engine: Engine
    faults: Faults
    started_at: float
    logs: LogRing
    users: UserDir
