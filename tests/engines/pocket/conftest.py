"""Shared fixtures for the Pocket TTS tests: random-weight model directories.

``tiny_model_dir`` / ``english_model_dir`` are built by
``engines.pocket.random_checkpoint`` (released layout, random weights). ``tiny_dir``
is built by the reference package itself (``reference_runner.py``) for the parity
tests; the reference always runs in a subprocess, since importing ``pocket_tts`` pins
torch to one thread for the whole process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.pocket.pocket_reference import (
    TEXTS,
    ReferenceResults,
    generation_jobs,
    reference_jobs,
    run_reference,
)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny-geometry model directory (reference state_dict, tokenizer, two voices)."""
    path = tmp_path_factory.mktemp("pocket") / "tiny"
    run_reference("build", str(path), "tiny", "1")
    return path


@pytest.fixture(scope="session")
def tiny_reference(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> ReferenceResults:
    """The reference's outputs for the standard jobs on ``tiny_dir``."""
    out_dir = tmp_path_factory.mktemp("reference")
    jobs = generation_jobs(tiny_dir)
    for name, text in TEXTS.items():
        jobs.append({"kind": "chunks", "name": f"chunks/{name}", "text": text})
        jobs.append({"kind": "chunks", "name": f"chunks10/{name}", "text": text, "max_tokens": 10})
    jobs.append({"kind": "clone", "name": "clone", "wav": str(tiny_dir / "marius.wav"),
                 "export": str(out_dir / "cloned.safetensors")})
    results = reference_jobs(tiny_dir, jobs, out_dir)
    results.meta["clone_export"] = str(out_dir / "cloned.safetensors")
    return results


@pytest.fixture(scope="session")
def tiny_model(tiny_dir: Path):
    from engines.pocket import load_model

    return load_model(tiny_dir)


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
