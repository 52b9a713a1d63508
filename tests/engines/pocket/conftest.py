"""Shared fixtures for the Pocket TTS tests: random-weight model directories.

``tiny_model_dir`` / ``english_model_dir`` are built by
``engines.pocket.random_checkpoint`` (released layout, random weights). ``tiny_dir``
is built by the reference package itself (``reference_runner.py``) for the parity
tests; the reference always runs in a subprocess, since importing ``pocket_tts`` pins
torch to one thread for the whole process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import safetensors.torch
import torch

RUNNER = Path(__file__).with_name("reference_runner.py")

MULTI_CHUNK_TEXT = (
    "one two three. four five six seven eight nine ten hello world voice speech stream frame "
    "model small quick brown fox jumps over lazy dog rain spain plain stays mainly in on at by "
    "for with from time day night! Is it 3.5 today?")
TEXTS = {
    "short": "Hello world, this is a test.",
    "tiny": "the quick fox",
    "multi": MULTI_CHUNK_TEXT,
    "curly": "It\u2019s   a good day\nto walk by the river",
}


def run_reference(*args: str, timeout: float = 300) -> None:
    proc = subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"reference runner failed:\n{proc.stderr[-4000:]}")


@dataclass
class ReferenceResults:
    tensors: dict[str, torch.Tensor]
    meta: dict

    def audio(self, name: str) -> torch.Tensor:
        return self.tensors[f"{name}/audio"]

    def latents(self, name: str) -> torch.Tensor:
        return self.tensors[f"{name}/latents"]


def reference_jobs(model_dir: Path, jobs: list[dict], out_dir: Path) -> ReferenceResults:
    jobs_path, out_path = out_dir / "jobs.json", out_dir / "reference.safetensors"
    jobs_path.write_text(json.dumps(jobs))
    run_reference("run", str(model_dir), str(jobs_path), str(out_path))
    tensors = safetensors.torch.load_file(str(out_path))
    meta = json.loads(bytes(tensors.pop("meta").tolist()).decode())
    return ReferenceResults(tensors, meta)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny-geometry model directory (reference state_dict, tokenizer, two voices)."""
    path = tmp_path_factory.mktemp("pocket") / "tiny"
    run_reference("build", str(path), "tiny", "1")
    return path


def generation_jobs(model_dir: Path) -> list[dict]:
    voices = model_dir / "embeddings"
    jobs = []
    for (name, text), voice, seed in zip(TEXTS.items(), ["alba", "marius", "marius", "alba"], [3, 4, 5, 6]):
        jobs.append({"kind": "generate", "name": name, "text": text, "seed": seed,
                     "voice": str(voices / f"{voice}.safetensors"), "temperature": 0.3})
    jobs.append({"kind": "generate", "name": "t0", "text": TEXTS["short"], "seed": 9,
                 "voice": str(voices / "alba.safetensors"), "temperature": 0.0})
    jobs.append({"kind": "generate", "name": "cloned", "text": TEXTS["short"], "seed": 11,
                 "voice": str(model_dir / "marius.wav"), "temperature": 0.3})
    jobs.append({"kind": "generate", "name": "int8", "text": TEXTS["short"], "seed": 3,
                 "voice": str(voices / "alba.safetensors"), "temperature": 0.3, "quantize": True})
    return jobs


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
