"""Loading a Pocket TTS model directory and the model object the engine uses.

Directory layout (the released one)::

    model.safetensors          keys of the reference TTSModel.state_dict(), f32 or bf16
    tokenizer.model            sentencepiece unigram, vocab = embedding rows - 1
    embeddings/<voice>.safetensors   voices (see engines.pocket.voice)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch
from torch import nn

from engines.base import CloneRefused, UnknownVoice
from engines.pocket.errors import PocketModelError, missing_file, shape_mismatch
from engines.pocket.flow_lm import FlowLM
from engines.pocket.generation import (
    ENGLISH_REPLACEMENTS,
    SMALL_MODEL_REPLACEMENTS,
    GenerationSettings,
    Tokenizer,
)
from engines.pocket.geometry import GeometryError, PocketGeometry, detect_geometry
from engines.pocket.mimi import Mimi
from engines.pocket.voice import VoiceState, load_voice_file, read_voice_layout

SAMPLE_RATE = 24000
MODEL_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.model"
VOICES_DIR = "embeddings"


class PocketModel(nn.Module):
    """Weights + tokenizer + voices of one model directory. Holds no per-stream state."""

    sample_rate = SAMPLE_RATE

    def __init__(self, geometry: PocketGeometry, tokenizer: Tokenizer | None = None,
                 model_dir: Path | None = None) -> None:
        super().__init__()
        self.geometry = geometry
        self.flow_lm = FlowLM(geometry)
        self.mimi = Mimi(geometry)
        self.tokenizer = tokenizer
        self.model_dir = model_dir
        self.quantized = False
        small = geometry.small
        self.defaults = GenerationSettings(
            eos_threshold=-1.0 if small else -4.0,
            replace_characters=tuple((SMALL_MODEL_REPLACEMENTS if small else ENGLISH_REPLACEMENTS).items()))
        self._voices: dict[str, VoiceState] = {}
        self._can_clone: bool | None = None  # decided on first use, after the weights are in

    @property
    def frame_samples(self) -> int:
        return self.mimi.frame_samples

    @property
    def can_clone(self) -> bool:
        """False on the ungated release, whose Mimi encoder weights are all zero."""
        if self._can_clone is None:
            self._can_clone = any(bool(p.detach().abs().sum() > 0) for p in self.mimi.encoder.parameters())
        return self._can_clone

    # voices -------------------------------------------------------------------------
    def voice_ids(self) -> list[str]:
        if self.model_dir is None or not (self.model_dir / VOICES_DIR).is_dir():
            return []
        return sorted(p.stem for p in (self.model_dir / VOICES_DIR).glob("*.safetensors"))

    def load_voice(self, voice_id: str) -> VoiceState:
        """The voice ``embeddings/<voice_id>.safetensors`` (read once, then cached)."""
        if voice_id not in self._voices:
            if voice_id not in self.voice_ids():
                raise UnknownVoice(voice_id, self.voice_ids())
            self._voices[voice_id] = self.read_voice(self.model_dir / VOICES_DIR / f"{voice_id}.safetensors")
        return self._voices[voice_id]

    def read_voice(self, path: str | Path) -> VoiceState:
        g = self.geometry
        return load_voice_file(path, g.lm_layers, g.lm_kv_heads, g.lm_head_dim)

    @torch.no_grad()
    def clone_voice(self, wav: np.ndarray, sample_rate: int) -> VoiceState:
        """A voice from a speech sample (mono or [channels, samples], any rate)."""
        from engines.pocket.cloning import prepare_prompt_audio

        if not self.can_clone:
            raise CloneRefused("this Pocket TTS checkpoint has no voice-cloning weights (its Mimi "
                               "encoder is all zeros); use one of the bundled voices")
        audio = prepare_prompt_audio(wav, sample_rate, SAMPLE_RATE)
        latents = self.mimi.encode(audio[None, :])
        prompt = self.flow_lm.voice_prompt(latents)
        cache = self.flow_lm.new_cache(1, prompt.shape[1])
        self.flow_lm.prompt(prompt, cache)
        layers = tuple(cache.data[i, :, 0, : prompt.shape[1]].clone() for i in range(self.geometry.lm_layers))
        return VoiceState(layers=layers, length=prompt.shape[1])

    def quantize_int8(self) -> None:
        """int8 dynamic quantization of the LM's attention and feed-forward linears."""
        from engines.pocket.quantize import quantize_lm_linears

        quantize_lm_linears(self.flow_lm)
        self.quantized = True


def _file_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    try:
        with safetensors.safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except Exception as exc:
        raise PocketModelError(f"{path}: not a readable safetensors file ({exc})", path=str(path)) from exc


def build_model(shapes: dict[str, tuple[int, ...]], path: Path, *, flow_type: str | None = None,
                lm_head_dim: int = 64, lm_kv_heads: int | None = None) -> PocketModel:
    """An uninitialised model for a checkpoint's shapes; every shape is checked."""
    try:
        geometry = detect_geometry(shapes, flow_type=flow_type, lm_head_dim=lm_head_dim,
                                   lm_kv_heads=lm_kv_heads)
    except GeometryError as exc:
        raise PocketModelError(f"{path}: {exc}", path=str(path)) from exc
    model = PocketModel(geometry)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    for key, shape in expected.items():
        if key not in shapes:
            raise PocketModelError(f"{path}: missing tensor {key!r} (expected shape {list(shape)})",
                                   path=str(path))
        if shapes[key] != shape:
            raise shape_mismatch(str(path), key, shape, shapes[key])
    unexpected = sorted(set(shapes) - set(expected))
    if unexpected:
        raise PocketModelError(f"{path}: unexpected tensor {unexpected[0]!r} "
                               f"(shape {list(shapes[unexpected[0]])}); not a Pocket TTS layout",
                               path=str(path))
    return model


def load_model(model_dir: str | Path, *, quantize: bool = False, flow_type: str | None = None) -> PocketModel:
    """Load ``model_dir``; raises PocketModelError naming the first bad file."""
    model_dir = Path(model_dir)
    weights, tokenizer_path = model_dir / MODEL_FILE, model_dir / TOKENIZER_FILE
    if not weights.is_file():
        raise missing_file(str(weights), "Pocket TTS weights")
    if not tokenizer_path.is_file():
        raise missing_file(str(tokenizer_path), "sentencepiece tokenizer")
    head_dim, kv_heads = 64, None
    voices_dir = model_dir / VOICES_DIR
    voices = sorted(voices_dir.glob("*.safetensors")) if voices_dir.is_dir() else []
    if voices:  # the head layout is not in the weights' shapes, but it is in a voice cache
        _, kv_heads, head_dim = read_voice_layout(voices[0])
    shapes = _file_shapes(weights)
    model = build_model(shapes, weights, flow_type=flow_type, lm_head_dim=head_dim, lm_kv_heads=kv_heads)
    tensors = safetensors.torch.load_file(str(weights))
    model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()}, strict=True)
    model.eval()
    try:
        tokenizer = Tokenizer(tokenizer_path)
    except Exception as exc:
        raise PocketModelError(f"{tokenizer_path}: not a sentencepiece model ({exc})",
                               path=str(tokenizer_path)) from exc
    if tokenizer.vocab_size != model.geometry.vocab_size:
        raise PocketModelError(
            f"{tokenizer_path}: has {tokenizer.vocab_size} pieces, expected {model.geometry.vocab_size} "
            f"(flow_lm.conditioner.embed.weight of {MODEL_FILE} has {model.geometry.vocab_size + 1} rows)",
            path=str(tokenizer_path))
    model.tokenizer, model.model_dir = tokenizer, model_dir
    if quantize:
        model.quantize_int8()
    return model
