"""Parity on the small released geometries, built by the reference from their configs.

``2m``: pointwise flow head, grouped-query attention (3 query heads, 1 key/value head,
192-wide attention in a 112-wide LM), low-rank text table, backbone projection, a
separate 128-wide Mimi decoder with a 50-step window. ``7m``: drifting flow head,
8/2 grouped-query attention, rank-64 text table. The vocabulary is 300 pieces.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.io.wavfile
import torch

from engines.pocket import PocketStream, load_model
from gateway.cli.models import POCKET_RELEASES
from tests.engines.pocket.pocket_reference import TEXTS, reference_jobs, run_reference

pytestmark = pytest.mark.reference


@pytest.fixture(scope="module", params=["2m", "7m"])
def small(request, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp(f"pocket-{request.param}")
    model_dir = root / "model"
    run_reference("build", str(model_dir), request.param, "1")
    voices = model_dir / "embeddings"
    jobs = [{"kind": "generate", "name": "short", "text": TEXTS["short"], "seed": 3, "temperature": 0.3,
             "voice": str(voices / "alba.safetensors")},
            {"kind": "generate", "name": "t0", "text": TEXTS["tiny"], "seed": 3, "temperature": 0.0,
             "voice": str(voices / "marius.safetensors")},
            {"kind": "chunks", "name": "chunks", "text": TEXTS["multi"] + " A \u2014 dash\u2013here."},
            {"kind": "clone", "name": "clone", "wav": str(model_dir / "marius.wav"),
             "export": str(root / "cloned.safetensors")}]
    return request.param, load_model(model_dir), reference_jobs(model_dir, jobs, root), root


def test_small_geometry_is_detected(small) -> None:
    name, model, _, _ = small
    g = model.geometry
    expected = {"2m": ("pointwise", 3, 1, 32), "7m": ("drifting", 8, 2, 64)}[name]
    assert (g.flow_type, g.lm_heads, g.lm_kv_heads, g.text_rank) == expected
    assert model.defaults.eos_threshold == -1.0
    assert (g.decoder_transformer.d_model, g.decoder_transformer.context) == (128, 50)


def test_small_geometry_is_sized_as_released(small) -> None:
    name, model, _, _ = small
    state = model.state_dict()
    values = sum(t.numel() for t in state.values())
    # 300 pieces here, 4000 in the release; every other tensor has the released shape
    rows, width = state["flow_lm.conditioner.embed.weight"].shape
    released = next(r for r in POCKET_RELEASES if r.name == {"2m": "english_2m_2026-10", "7m": "english_7m_2026-10"}[name])
    assert values + (4001 - rows) * width == released.weights


def test_small_geometry_audio_matches_reference(small) -> None:
    _, model, reference, _ = small
    for name, voice, text, temperature in [("short", "alba", TEXTS["short"], 0.3),
                                           ("t0", "marius", TEXTS["tiny"], 0.0)]:
        settings = replace(model.defaults, temperature=temperature)
        ours = np.concatenate(list(PocketStream(model, text, model.load_voice(voice), settings, seed=3)))
        expected = reference.audio(name).numpy()
        assert ours.shape == expected.shape
        assert np.abs(expected).max() > 0.01
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5, err_msg=name)


def test_small_geometry_chunks_with_its_replacements(small) -> None:
    _, model, reference, _ = small
    from engines.pocket import split_text

    chunks = split_text(model.tokenizer, TEXTS["multi"] + " A \u2014 dash\u2013here.", 50,
                        dict(model.defaults.replace_characters))
    assert chunks == reference.meta["chunks"]["chunks"]


def test_small_geometry_cloning_matches_reference(small) -> None:
    _, model, _, root = small
    rate, samples = scipy.io.wavfile.read(root / "model" / "marius.wav")
    ours = model.clone_voice(samples.astype(np.float32) / 32768.0, rate)
    theirs = model.read_voice(Path(root) / "cloned.safetensors")
    assert ours.length == theirs.length
    for mine, ref in zip(ours.layers, theirs.layers, strict=True):
        torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-5)
