"""The reference package, driven from the tests through ``reference_runner.py``.

Texts and jobs shared by the parity tests; the runner is a subprocess because
importing ``pocket_tts`` pins torch to one thread for the whole process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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


def generation_jobs(model_dir: Path) -> list[dict]:
    voices = model_dir / "embeddings"
    jobs = []
    for (name, text), voice, seed in zip(TEXTS.items(), ["alba", "marius", "marius", "alba"], [3, 4, 5, 6], strict=True):
        jobs.append({"kind": "generate", "name": name, "text": text, "seed": seed,
                     "voice": str(voices / f"{voice}.safetensors"), "temperature": 0.3})
    jobs.append({"kind": "generate", "name": "t0", "text": TEXTS["short"], "seed": 9,
                 "voice": str(voices / "alba.safetensors"), "temperature": 0.0})
    jobs.append({"kind": "generate", "name": "cloned", "text": TEXTS["short"], "seed": 11,
                 "voice": str(model_dir / "marius.wav"), "temperature": 0.3})
    jobs.append({"kind": "generate", "name": "int8", "text": TEXTS["short"], "seed": 3,
                 "voice": str(voices / "alba.safetensors"), "temperature": 0.3, "quantize": True})
    return jobs
