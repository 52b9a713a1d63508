"""What one utterance asks of the model, sentence by sentence, and where its voice prompt comes from.

Everything here runs on the engine's worker thread (``Plan.run`` is the job of
one sentence), so it may call the backend and block.

Voices:
- a designed voice: its anchor prompt from the cache, made once from the
  voice's ``instruct`` (see engines/omnivoice/voices.py);
- a cloned voice: its prompt from the cache, rebuilt from the stored clip on a miss;
- no voice but an ``instruct`` (voice design for this utterance): the first
  sentence is designed, and the sentences after it are cloned from the first
  one, so the utterance keeps one speaker.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engines.base import EngineError
from engines.omnivoice.backend import Backend
from engines.omnivoice.prompts import PromptCache, PromptData, prompt_key
from engines.omnivoice.voices import ANCHOR_SEED, ANCHOR_TEXT, ClonedVoice, DesignedVoice, VoiceStore

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """One utterance: its sentences and how each is voiced."""

    sentences: list[str]
    voice: DesignedVoice | ClonedVoice | None
    instruct: str | None
    language: str | None
    seed: int | None
    backend: Callable[[], Backend]  # the loaded model (reloaded after an idle unload)
    prompts: PromptSource
    anchor: PromptData | None = field(default=None, repr=False)  # the first sentence, for voice design

    def run(self, index: int) -> np.ndarray:
        backend = self.backend()
        prompt = self.prompts.prompt_for(self.voice, backend) if self.voice is not None else self.anchor
        instruct = self.instruct if not isinstance(self.voice, DesignedVoice) else None
        audio = backend.generate(self.sentences[index], prompt=prompt, instruct=instruct, language=self.language,
                                 seed=self.seed)
        if self.voice is None and self.instruct and index == 0 and len(self.sentences) > 1 and len(audio):
            try:
                self.anchor = backend.make_prompt(audio, backend.sample_rate, self.sentences[0])
            except ValueError as exc:  # e.g. nothing but silence: the next sentences are designed afresh
                log.warning("cannot anchor the designed voice on its first sentence: %s", exc)
        return audio


class PromptSource:
    """Voice prompts through the cache: the memory LRU, then disk, then made anew."""

    def __init__(self, cache: PromptCache, store: VoiceStore) -> None:
        self.cache, self.store = cache, store

    def key_for(self, voice: DesignedVoice | ClonedVoice, fingerprint: str) -> str:
        if isinstance(voice, DesignedVoice):
            return prompt_key("designed", fingerprint, voice.instruct, voice.language, str(ANCHOR_SEED), ANCHOR_TEXT)
        return prompt_key("cloned", fingerprint, voice.clip_sha256, voice.transcript)

    def prompt_for(self, voice: DesignedVoice | ClonedVoice, backend: Backend) -> PromptData:
        key = self.key_for(voice, backend.fingerprint)
        prompt = self.cache.get(key)
        if prompt is not None:
            return prompt
        if isinstance(voice, DesignedVoice):
            anchor = backend.generate(ANCHOR_TEXT, prompt=None, instruct=voice.instruct, language=voice.language,
                                      seed=ANCHOR_SEED)
            prompt = make_prompt(backend, anchor, backend.sample_rate, ANCHOR_TEXT)
        else:
            audio, rate = read_clip(self.store.read_clip(voice))
            prompt = make_prompt(backend, audio, rate, voice.transcript)
        self.cache.put(key, prompt)
        return prompt


def make_prompt(backend: Backend, audio: np.ndarray, rate: int, transcript: str | None) -> PromptData:
    """A prompt from mono audio at any rate (resampled to the model's rate first)."""
    if rate != backend.sample_rate:
        audio, rate = resample(audio, rate, backend.sample_rate), backend.sample_rate
    try:
        return backend.make_prompt(audio, rate, transcript)
    except ValueError as exc:
        raise EngineError(f"file: cannot make a voice from this clip: {exc}", code="bad_audio") from None


def read_clip(wav_bytes: bytes) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the rate of a WAV file; ``EngineError`` (bad_audio) if unreadable."""
    import soundfile

    try:
        data, rate = soundfile.read(io.BytesIO(wav_bytes), dtype="float32", always_2d=True)
    except Exception as exc:
        raise EngineError(f"file: not a readable WAV file ({exc})", code="bad_audio") from None
    audio = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not len(audio) or not np.isfinite(audio).all():
        raise EngineError("file: the clip is empty or has NaN/infinite samples", code="bad_audio")
    return np.ascontiguousarray(audio, dtype=np.float32), int(rate)


def resample(audio: np.ndarray, rate: int, target: int) -> np.ndarray:
    import soxr

    out = soxr.resample(np.asarray(audio, dtype=np.float32), rate, target, quality="HQ")
    return np.asarray(out, dtype=np.float32)
