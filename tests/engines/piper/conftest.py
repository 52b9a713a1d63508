"""Fixtures of the Piper engine's tests."""

from __future__ import annotations

import pytest

from engines.piper.voices import VoiceFile, find_voices


@pytest.fixture(scope="module")
def joe() -> VoiceFile:
    """The bundled voice (joe, medium), as the engine finds it."""
    voices, _ = find_voices([])
    return voices["en_US-joe-medium"]
