"""The tiny random OmniVoice, built once per test session for the slow tests that load it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engines.omnivoice.random_model import build_random_model

    return build_random_model(tmp_path_factory.mktemp("omnivoice-model"))
