"""The released OmniVoice weights on a GPU: runs where both are present, skipped
elsewhere with what is missing (the tiny random model covers the same code on CPU)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from engines.base import SynthesisOptions
from engines.omnivoice.backend import LoadSpec, check_model_dir, resolve_local
from engines.omnivoice.engine import OmniVoiceEngine

pytestmark = pytest.mark.slow

# Where the weights are looked for: the same variable the gateway reads, else its default place.
WEIGHTS = os.environ.get("VOXGATE_OMNIVOICE_MODEL") or str(Path("~/.local/share/voxgate/models/omnivoice").expanduser())


def _missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA GPU (torch {torch.__version__}, CUDA {torch.version.cuda or 'none'})"
    path = resolve_local(WEIGHTS)
    if path is None:
        return f"OmniVoice weights not found at {WEIGHTS} (set VOXGATE_OMNIVOICE_MODEL)"
    try:
        check_model_dir(path)
    except Exception as exc:
        return str(exc)
    return None


async def test_real_weights_speak_two_sentences_on_the_gpu(tmp_path: Path) -> None:
    missing = _missing()
    if missing:
        pytest.skip(f"needs a GPU and the OmniVoice weights: {missing}")
    engine = OmniVoiceEngine(LoadSpec(model=WEIGHTS, device="cuda"), tmp_path / "voices", tmp_path / "cache",
                             split_sentences=lambda text: [s.strip() + "." for s in text.split(".") if s.strip()])
    await engine.load()
    assert engine.status().state.value == "ready", engine.status()
    stream = engine.open_stream("The weather is fine today. We will go for a walk.",
                                options=SynthesisOptions(seed=1, extra={"language": "en"}))
    frames = [frame async for frame in stream.frames()]
    audio = np.concatenate(frames)
    assert all(len(f) <= 1920 for f in frames)
    assert 1.5 < len(audio) / 24000 < 15  # two short sentences of speech
    assert float(np.sqrt(np.mean(audio ** 2))) > 0.01  # not silence
    await engine.close()
