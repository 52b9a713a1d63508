"""Routes of the TTS feature: /v1/tts and the speech HTTP routes."""

from __future__ import annotations


def tts_routes() -> list:
    return []
