"""Shared fixtures for the Pocket TTS tests: random-weight model directories.

The directories are built once per test session by
``engines.pocket.random_checkpoint`` (released layout, random weights).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete tiny-geometry model directory (seed 0)."""
    from engines.pocket.random_checkpoint import make_random_model_dir

    dest = tmp_path_factory.mktemp("pocket-tiny") / "model"
    make_random_model_dir(dest, geometry="tiny", seed=0)
    return dest


@pytest.fixture(scope="session")
def english_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete English-geometry model directory (seed 0); ~440 MB, ~10 s to write."""
    from engines.pocket.random_checkpoint import make_random_model_dir

    dest = tmp_path_factory.mktemp("pocket-english") / "model"
    make_random_model_dir(dest, geometry="english", seed=0)
    return dest
