"""Errors raised while loading a Pocket TTS model directory."""

from __future__ import annotations

from engines.base import EngineError


class PocketModelError(EngineError):
    """A model file is missing, unreadable or has the wrong shape.

    ``code`` is ``model_file_missing`` or ``model_file_invalid``; ``path`` names the file.
    """

    code = "model_file_invalid"

    def __init__(self, message: str, *, path: str = "", code: str | None = None, hint: str = "") -> None:
        super().__init__(message, code=code, hint=hint)
        self.path = path


def missing_file(path: str, what: str, hint: str = "") -> PocketModelError:
    return PocketModelError(f"{path}: file not found ({what})", path=path,
                            code="model_file_missing", hint=hint)


def shape_mismatch(path: str, key: str, expected: tuple, found: tuple) -> PocketModelError:
    return PocketModelError(
        f"{path}: tensor {key!r} has shape {list(found)}, expected {list(expected)}",
        path=path)
