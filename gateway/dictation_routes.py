"""Routes of the dictation feature: /v1/dictation and /v1/audio/transcriptions."""

from __future__ import annotations


def dictation_routes() -> list:
    return []
