"""Parity with the reference on the full English geometry (6 x 1024 flow LM, 512-wide Mimi).

The vocabulary is 600 pieces instead of 4000 (a 4000-piece unigram model needs megabytes
of training text); every other tensor has the released shape.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.io.wavfile
import torch

from engines.pocket import PocketStream, load_model
from tests.engines.pocket.pocket_reference import ReferenceResults, reference_jobs, run_reference

pytestmark = [pytest.mark.slow, pytest.mark.reference]

TEXT = "Hello world, this is a test of the full model."


@pytest.fixture(scope="module")
def english(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReferenceResults]:
    root = tmp_path_factory.mktemp("pocket-english-ref")
    model_dir = root / "model"
    run_reference("build", str(model_dir), "english", "2")
    voices = model_dir / "embeddings"
    jobs = [
        {"kind": "generate", "name": "voice", "text": TEXT, "seed": 3, "temperature": 0.3,
         "voice": str(voices / "alba.safetensors")},
        {"kind": "generate", "name": "t0", "text": "Hello world.", "seed": 3, "temperature": 0.0,
         "voice": str(voices / "marius.safetensors")},
        {"kind": "clone", "name": "clone", "wav": str(model_dir / "marius.wav"),
         "export": str(root / "cloned.safetensors")},
    ]
    return model_dir, reference_jobs(model_dir, jobs, root)


@pytest.fixture(scope="module")
def model(english):
    return load_model(english[0])


def test_english_geometry_audio_matches_reference(english, model) -> None:
    reference = english[1]
    g = model.geometry
    assert (g.lm_dim, g.lm_layers, g.lm_heads, g.decoder_transformer.context) == (1024, 6, 16, 250)
    for name, voice, text, seed, temperature in [("voice", "alba", TEXT, 3, 0.3),
                                                 ("t0", "marius", "Hello world.", 3, 0.0)]:
        settings = replace(model.defaults, temperature=temperature)
        ours = np.concatenate(list(PocketStream(model, text, model.load_voice(voice), settings, seed)))
        expected = reference.audio(name).numpy()
        assert ours.shape == expected.shape
        assert np.abs(expected).max() > 0.01
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5, err_msg=name)


def test_english_geometry_cloning_matches_reference(english, model) -> None:
    model_dir = english[0]
    rate, samples = scipy.io.wavfile.read(model_dir / "marius.wav")
    ours = model.clone_voice(samples.astype(np.float32) / 32768.0, rate)
    theirs = model.read_voice(Path(model_dir).parent / "cloned.safetensors")
    assert ours.length == theirs.length
    for mine, ref in zip(ours.layers, theirs.layers, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-5)
