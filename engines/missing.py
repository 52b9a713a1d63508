"""The one exception for a model or weights that are not on this machine."""

from __future__ import annotations


class ModelMissing(Exception):
    """The configured model is not on this machine; ``hint`` says how to get it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint
