"""Loading a model directory: clear errors naming the file, expected and found shape."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from engines.base import CloneRefused, UnknownVoice
from engines.pocket import PocketModelError, load_model, save_voice_file, synthesize


@pytest.fixture
def model_copy(tiny_dir: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "model"
    shutil.copytree(tiny_dir, dest)
    return dest


def _rewrite(path: Path, change) -> None:
    tensors = safetensors.torch.load_file(str(path))
    change(tensors)
    safetensors.torch.save_file(tensors, str(path))


@pytest.mark.parametrize(("name", "what"), [
    ("model.safetensors", "Pocket TTS weights"),
    ("tokenizer.model", "sentencepiece tokenizer"),
])
def test_a_missing_file_is_named_with_what_it_is(model_copy: Path, name: str, what: str) -> None:
    (model_copy / name).unlink()
    with pytest.raises(PocketModelError) as info:
        load_model(model_copy)
    assert str(info.value) == f"{model_copy / name}: file not found ({what})"
    assert info.value.code == "model_file_missing"


def test_mismatched_shape_names_file_key_expected_and_found(model_copy: Path) -> None:
    weights = model_copy / "model.safetensors"
    _rewrite(weights, lambda t: t.__setitem__("flow_lm.out_eos.weight", torch.zeros(1, 100)))
    with pytest.raises(PocketModelError) as info:
        load_model(model_copy)
    assert str(info.value) == (f"{weights}: tensor 'flow_lm.out_eos.weight' has shape [1, 100], "
                               "expected [1, 128]")
    assert info.value.code == "model_file_invalid"


def test_missing_tensor_is_named(model_copy: Path) -> None:
    weights = model_copy / "model.safetensors"
    _rewrite(weights, lambda t: t.pop("mimi.decoder_transformer.transformer.layers.1.linear2.weight"))
    with pytest.raises(PocketModelError) as info:
        load_model(model_copy)
    assert str(info.value) == (f"{weights}: missing tensor "
                               "'mimi.decoder_transformer.transformer.layers.1.linear2.weight' "
                               "(expected shape [64, 128])")


def test_truncated_weights_file(model_copy: Path) -> None:
    weights = model_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(PocketModelError, match=r"model\.safetensors: not a readable safetensors file"):
        load_model(model_copy)


def test_tokenizer_of_another_size(model_copy: Path) -> None:
    weights = model_copy / "model.safetensors"

    def grow(t: dict) -> None:
        key = "flow_lm.conditioner.embed.weight"
        t[key] = torch.zeros(402, t[key].shape[1])

    _rewrite(weights, grow)
    with pytest.raises(PocketModelError) as info:
        load_model(model_copy)
    assert str(info.value) == (f"{model_copy / 'tokenizer.model'}: has 300 pieces, expected 401 "
                               "(flow_lm.conditioner.embed.weight of model.safetensors has 402 rows)")


def test_bf16_weights_are_upcast(model_copy: Path, tiny_model) -> None:
    weights = model_copy / "model.safetensors"
    _rewrite(weights, lambda t: t.update({k: v.to(torch.bfloat16) for k, v in t.items()
                                          if v.is_floating_point()}))
    model = load_model(model_copy)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    ours = model.flow_lm.input_linear.weight
    expected = tiny_model.flow_lm.input_linear.weight.to(torch.bfloat16).to(torch.float32)
    assert torch.equal(ours, expected)
    assert synthesize(model, "Hello.", model.load_voice("alba"), seed=1).size > 0


def test_voice_with_wrong_head_layout(model_copy: Path, tiny_model) -> None:
    voice = tiny_model.load_voice("alba")
    bad = model_copy / "embeddings" / "zz_bad.safetensors"
    safetensors.torch.save_file({f"transformer.layers.{n}.self_attn/cache": torch.zeros(2, 1, 5, 4, 32)
                                 for n in range(2)} | {f"transformer.layers.{n}.self_attn/offset":
                                 torch.tensor([5]) for n in range(2)}, str(bad))
    model = load_model(model_copy)  # the first voice (alba) fixes the head layout
    with pytest.raises(PocketModelError) as info:
        model.load_voice("zz_bad")
    assert str(info.value) == (f"{bad}: tensor 'transformer.layers.0.self_attn/cache' has shape "
                               "[2, 1, 5, 4, 32], expected [2, 1, 5, 2, 64]")
    assert model.load_voice("alba").length == voice.length


def test_unknown_voice_lists_the_available_ones(tiny_model) -> None:
    with pytest.raises(UnknownVoice) as info:
        tiny_model.load_voice("nobody")
    assert str(info.value) == "unknown voice 'nobody'; available voices: alba, marius"


def test_saved_voice_round_trips(tiny_model, tmp_path: Path) -> None:
    voice = tiny_model.load_voice("marius")
    save_voice_file(voice, tmp_path / "v.safetensors")
    stored = safetensors.torch.load_file(str(tmp_path / "v.safetensors"))
    assert stored["transformer.layers.0.self_attn/cache"].shape == (2, 1, voice.length, 2, 64)
    assert stored["transformer.layers.0.self_attn/offset"].dtype == torch.int64
    again = tiny_model.read_voice(tmp_path / "v.safetensors")
    assert again.length == voice.length
    assert all(torch.equal(a, b) for a, b in zip(again.layers, voice.layers, strict=True))


def test_cloning_refused_when_encoder_is_zero(model_copy: Path) -> None:
    def zero_encoder(t: dict) -> None:
        t.update({k: torch.zeros_like(v) for k, v in t.items() if k.startswith("mimi.encoder.")})

    _rewrite(model_copy / "model.safetensors", zero_encoder)
    model = load_model(model_copy)
    assert not model.can_clone
    with pytest.raises(CloneRefused) as info:
        model.clone_voice(np.zeros(24000, dtype=np.float32), 24000)
    assert info.value.code == "clone_unsupported"
    assert str(info.value) == ("this Pocket TTS checkpoint has no voice-cloning weights (its Mimi "
                               "encoder is all zeros); use one of the bundled voices")


@pytest.mark.parametrize(("audio", "message"), [
    (np.zeros(0, dtype=np.float32), "audio: expected a non-empty mono or [channels, samples] signal"),
    (np.zeros((2, 2, 5), dtype=np.float32), "audio: expected a non-empty mono or [channels, samples] signal"),
    (np.array([0.1, np.nan, 0.2], dtype=np.float32), "audio: contains NaN or infinite samples"),
])
def test_cloning_rejects_unusable_audio(tiny_model, audio: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError) as info:
        tiny_model.clone_voice(audio, 24000)
    assert str(info.value) == message


def test_read_wav_reports_garbage() -> None:
    from engines.pocket.cloning import read_wav

    with pytest.raises(ValueError, match=r"^audio: not a readable WAV file \("):
        read_wav(b"RIFF....not really")
