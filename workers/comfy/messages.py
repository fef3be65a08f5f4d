"""ComfyUI's WebSocket vocabulary (PROTOCOL.md section 2): text frame types, binary frame kinds."""

from enum import IntEnum, StrEnum


class EventKind(StrEnum):
    """The `type` of a JSON text frame."""

    STATUS = "status"
    EXECUTION_START = "execution_start"
    EXECUTION_CACHED = "execution_cached"
    EXECUTING = "executing"
    PROGRESS = "progress"
    PROGRESS_STATE = "progress_state"
    EXECUTED = "executed"
    EXECUTION_SUCCESS = "execution_success"
    EXECUTION_ERROR = "execution_error"
    EXECUTION_INTERRUPTED = "execution_interrupted"
    FEATURE_FLAGS = "feature_flags"


class BinaryKind(IntEnum):
    """The big-endian u32 that starts every binary frame (`protocol.py`)."""

    PREVIEW_IMAGE = 1
    TEXT = 3
    PREVIEW_IMAGE_WITH_METADATA = 4
