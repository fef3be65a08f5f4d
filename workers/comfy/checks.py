"""Stand-ins for the VALIDATE_INPUTS hooks of node classes, which object_info does not carry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CheckResult = bool | str


@dataclass(frozen=True)
class CustomCheck:
    """Stands in for a class's VALIDATE_INPUTS (e.g. LoadImage checking its file exists).

    `inputs` are the inputs the hook takes: ComfyUI skips the min/max and combo checks for
    them. `check` receives those of them that the node sets (a linked one as None, since
    nothing has run yet) and returns True when valid, False, or an error text; either of the
    last two becomes one `custom_validation_failed` per input passed. An exception it raises
    is reported as ComfyUI reports one from VALIDATE_INPUTS.
    """

    inputs: frozenset[str]
    check: Callable[[Mapping[str, Any]], CheckResult]


# Core classes whose VALIDATE_INPUTS checks that an input-directory file exists, the input it
# takes, and the word of its error text.
_FILE_LOADERS: Mapping[str, tuple[str, str]] = {
    "LoadImage": ("image", "image"),
    "LoadImageMask": ("image", "image"),
    "LoadImageOutput": ("image", "image"),
    "LoadLatent": ("latent", "latent"),
    "LoadAudio": ("audio", "audio"),
    "LoadVideo": ("file", "video"),
}


def file_checks(exists: Callable[[str], bool]) -> dict[str, CustomCheck]:
    """Custom checks for the core loaders of input files (LoadImage, LoadImageMask, ...).

    `exists(name)` tells whether an annotated file name ("x.png", "sub/x.png",
    "x.png [output]") exists on the instance; a failure reads "Invalid image file: NAME"
    (or "latent", "audio", "video"), as in ComfyUI.
    """
    return {
        class_type: CustomCheck(frozenset({name}), _file_check(class_type, name, word, exists))
        for class_type, (name, word) in _FILE_LOADERS.items()
    }


def _file_check(
    class_type: str, name: str, word: str, exists: Callable[[str], bool]
) -> Callable[[Mapping[str, Any]], CheckResult]:
    def check(values: Mapping[str, Any]) -> CheckResult:
        if name not in values:
            # ComfyUI calls the hook without the argument, and Python says so.
            raise TypeError(
                f"{class_type}.VALIDATE_INPUTS() missing 1 required positional argument: '{name}'"
            )
        value = values[name]
        if not isinstance(value, str):
            raise AttributeError(f"'{type(value).__name__}' object has no attribute 'endswith'")
        return True if exists(value) else f"Invalid {word} file: {value}"

    return check
