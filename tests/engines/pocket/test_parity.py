"""Our implementation against the reference package on the same random weights.

Same weights, same seed (so the same noise), same voice: the played latents and the
PCM must agree frame by frame to float32 rounding. Tolerances: latents 1e-5 absolute,
PCM 1e-5 absolute (observed: ~2e-7 on tiny, see docs/engines/pocket.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.io.wavfile
import torch

from engines.pocket import StreamBatch, save_voice_file, split_text
from engines.pocket.generation import plan_chunks, prepare_text
from tests.engines.pocket.pocket_reference import TEXTS, ReferenceResults, reference_jobs

pytestmark = pytest.mark.reference

PCM_ATOL = 1e-5
LATENT_ATOL = 1e-5
INT8_PCM_ATOL = 1e-5  # the same torch.ao int8 kernels on both sides: observed 2.4e-7


def _ours(model, name: str, text: str, voice, seed: int, temperature: float = 0.3):
    settings = replace(model.defaults, temperature=temperature)
    latents: list[torch.Tensor] = []
    batch = StreamBatch(model, max_streams=1)
    original = model.mimi.decode

    def record(frames, state):
        latents.append(frames[0].clone())
        return original(frames, state)

    model.mimi.decode = record
    try:
        batch.add(text, voice, settings, seed=seed)
        frames = []
        while len(batch):
            (out,) = batch.step()
            if out.pcm is not None:
                frames.append(out.pcm)
    finally:
        del model.mimi.decode
    return frames, torch.cat(latents) if latents else torch.zeros(0, 32)


def _assert_same_audio(frames: list[np.ndarray], reference: torch.Tensor, frame_samples: int) -> None:
    assert all(f.shape == (frame_samples,) and f.dtype == np.float32 for f in frames)
    ours = np.concatenate(frames)
    assert ours.shape == tuple(reference.shape)
    ref = reference.numpy()
    for i in range(len(frames)):  # frame by frame, so a failure says where
        part = slice(i * frame_samples, (i + 1) * frame_samples)
        np.testing.assert_allclose(ours[part], ref[part], rtol=0, atol=PCM_ATOL, err_msg=f"frame {i}")
    assert np.abs(ref).max() > 0.05  # real signal, not silence on both sides


@pytest.mark.parametrize(("name", "voice", "seed"), [("short", "alba", 3), ("tiny", "marius", 4),
                                             ("multi", "marius", 5), ("curly", "alba", 6)])
def test_audio_and_latents_match_reference(tiny_model, tiny_reference: ReferenceResults,
                                           name: str, voice: str, seed: int) -> None:
    frames, latents = _ours(tiny_model, name, TEXTS[name], tiny_model.load_voice(voice), seed)
    ref_latents = tiny_reference.latents(name)
    assert latents.shape == ref_latents.shape
    torch.testing.assert_close(latents, ref_latents, rtol=0, atol=LATENT_ATOL)
    _assert_same_audio(frames, tiny_reference.audio(name), tiny_model.frame_samples)


def test_multi_chunk_text_is_really_several_chunks(tiny_model, tiny_reference) -> None:
    assert len(tiny_reference.meta["chunks/multi"]["chunks"]) == 2
    plans = plan_chunks(tiny_model.tokenizer, TEXTS["multi"], tiny_model.defaults)
    assert len(plans) == 2


def test_eos_ended_some_chunks(tiny_reference) -> None:
    # the stopping rule is exercised, not only the length limit
    assert any(any(tiny_reference.meta[name]["eos"][6:]) for name in ("short", "multi"))


def test_temperature_zero_equals_reference_and_is_deterministic(tiny_model, tiny_reference) -> None:
    voice = tiny_model.load_voice("alba")
    first, _ = _ours(tiny_model, "t0", TEXTS["short"], voice, seed=9, temperature=0.0)
    again, _ = _ours(tiny_model, "t0", TEXTS["short"], voice, seed=12345, temperature=0.0)
    _assert_same_audio(first, tiny_reference.audio("t0"), tiny_model.frame_samples)
    assert np.array_equal(np.concatenate(first), np.concatenate(again))


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("budget", [50, 10])
def test_chunks_and_tokens_match_reference(tiny_model, tiny_reference, name: str, budget: int) -> None:
    expected = tiny_reference.meta[f"chunks{'' if budget == 50 else budget}/{name}"]
    replacements = dict(tiny_model.defaults.replace_characters)
    chunks = split_text(tiny_model.tokenizer, TEXTS[name], budget, replacements)
    assert chunks == expected["chunks"]
    assert [tiny_model.tokenizer.encode(c) for c in chunks] == expected["tokens"]


def test_reference_exported_voice_loads_with_its_shape(tiny_model, tiny_dir: Path) -> None:
    voice = tiny_model.load_voice("marius")
    g = tiny_model.geometry
    assert len(voice.layers) == g.lm_layers
    assert voice.layers[0].shape == (2, voice.length, g.lm_kv_heads, g.lm_head_dim)


def test_cloning_matches_reference_voice_state(tiny_model, tiny_dir: Path, tiny_reference) -> None:
    rate, samples = scipy.io.wavfile.read(tiny_dir / "marius.wav")
    ours = tiny_model.clone_voice(samples.astype(np.float32) / 32768.0, rate)
    reference = tiny_model.read_voice(tiny_reference.meta["clone_export"])
    assert ours.length == reference.length
    for mine, theirs in zip(ours.layers, reference.layers, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_cloned_voice_speaks_like_reference(tiny_model, tiny_dir: Path, tiny_reference) -> None:
    rate, samples = scipy.io.wavfile.read(tiny_dir / "marius.wav")
    voice = tiny_model.clone_voice(samples.astype(np.float32) / 32768.0, rate)
    frames, _ = _ours(tiny_model, "cloned", TEXTS["short"], voice, seed=11)
    _assert_same_audio(frames, tiny_reference.audio("cloned"), tiny_model.frame_samples)


def test_our_voice_file_speaks_the_same_in_the_reference(tiny_model, tiny_dir: Path, tmp_path: Path) -> None:
    rate, samples = scipy.io.wavfile.read(tiny_dir / "alba.wav")
    voice = tiny_model.clone_voice(samples.astype(np.float32) / 32768.0, rate)
    save_voice_file(voice, tmp_path / "ours.safetensors")
    job = {"kind": "generate", "name": "ours", "text": TEXTS["tiny"], "seed": 21, "temperature": 0.3,
           "voice": str(tmp_path / "ours.safetensors")}
    reference = reference_jobs(tiny_dir, [job], tmp_path)
    frames, _ = _ours(tiny_model, "ours", TEXTS["tiny"], voice, seed=21)
    _assert_same_audio(frames, reference.audio("ours"), tiny_model.frame_samples)


def test_cloning_resamples_other_rates(tiny_model, tiny_dir: Path) -> None:
    rate, samples = scipy.io.wavfile.read(tiny_dir / "marius.wav")
    audio = samples.astype(np.float32) / 32768.0
    from scipy.signal import resample_poly

    at_16k = resample_poly(audio, 2, 3).astype(np.float32)
    voice = tiny_model.clone_voice(np.stack([at_16k, at_16k]), 16000)  # stereo, 16 kHz
    direct = tiny_model.clone_voice(audio, rate)
    assert abs(voice.length - direct.length) <= 1
    assert voice.layers[0].shape[1:] == direct.layers[0].shape[1:]


def test_text_preparation_matches_reference_rules() -> None:
    assert prepare_text("hello world") == ("Hello world.", 3)
    assert prepare_text("  one two three four five,  ") == ("One two three four five.", 1)
    assert prepare_text('he said "stop"') == ('He said "stop".', 3)
    assert prepare_text("Really?!") == ("Really?!", 3)
    assert prepare_text("it\u2019s fine", {"\u2019": "'"}) == ("It's fine.", 3)
    with pytest.raises(ValueError, match="^text: must contain at least one non-space character$"):
        prepare_text("   ")


def test_int8_matches_reference_int8(tiny_dir: Path, tiny_reference) -> None:
    from engines.pocket import load_model

    model = load_model(tiny_dir, quantize=True)
    assert model.quantized
    frames, _latents = _ours(model, "int8", TEXTS["short"], model.load_voice("alba"), seed=3)
    reference = tiny_reference.audio("int8")
    ours = np.concatenate(frames)
    assert ours.shape == tuple(reference.shape)
    np.testing.assert_allclose(ours, reference.numpy(), rtol=0, atol=INT8_PCM_ATOL)
