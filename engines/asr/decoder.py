"""The whisper wrapper: one loaded faster-whisper model.

Up to ``lanes`` threads may decode at once (CTranslate2 runs that many calls
in parallel on the one model); each call is independent. Every call is deterministic (temperature 0, no
fallback) and guarded against the known failure modes of short-window
re-decoding: repetition loops (a cap on new tokens per audio second, segments
with a compression ratio above 2.4 dropped) and text invented for non-speech
(segments with no_speech_prob > 0.6 and avg_logprob < -1, or > 0.9, dropped, and, when
word timings are known, segments spoken impossibly fast).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .framing import SAMPLE_RATE
from .prompt_text import prompt_tokens, repeats_prompt
from .tuning import PolicyTuning

MAX_COMPRESSION_RATIO = 2.4
NO_SPEECH_PROB = 0.6
# Above this the model is sure there is no speech, whatever its text's log-probability
# (digital silence decodes to a confident "you"); speech windows stay far below it.
NO_SPEECH_SURE = 0.9
LOW_LOGPROB = -1.0
TOKENS_PER_AUDIO_S = 8  # English speech runs ~3-4 tokens/s; twice that is generous
MAX_WORDS_PER_S = 10.0
FRAMES_PER_S = 100
FULL_WINDOW_FRAMES = 3000


@dataclass
class Word:
    word: str
    start: float
    end: float
    probability: float

    def to_dict(self) -> dict:
        return {"word": self.word, "start": round(self.start, 3), "end": round(self.end, 3),
                "probability": round(self.probability, 4)}


@dataclass
class Transcript:
    text: str
    language: str
    words: list[Word] = field(default_factory=list)
    decode_s: float = 0.0


def split_cores(lanes: int, threads: int, cores: int) -> tuple[int, int]:
    """Decode lanes and threads per lane for ``cores`` CPU cores; a 0 is filled in
    so that lanes x threads = cores (both 0: one single-threaded lane per core).

    Several single-threaded decodes at once beat one decode on every core: a short
    window's decode does not spread well over threads (docs/dictation.md, *Levers*).
    """
    cores = max(1, cores)
    if lanes <= 0:
        lanes = max(1, cores // threads) if threads > 0 else cores
    if threads <= 0:
        threads = max(1, cores // lanes)
    return lanes, threads


class WhisperDecoder:
    """Loads a model once; ``decode`` transcribes one window of 16 kHz audio."""

    def __init__(self, source: str, compute_type: str = "int8", threads: int = 0, lanes: int = 1) -> None:
        from faster_whisper import WhisperModel

        # ``lanes`` decodes may run at once (from as many threads), ``threads`` each
        self.model = WhisperModel(source, device="cpu", compute_type=compute_type, cpu_threads=threads,
                                  num_workers=lanes)
        self.multilingual = bool(self.model.model.is_multilingual)
        self._tokenizers: dict[str, Any] = {}

    def languages(self) -> list[str]:
        if not self.multilingual:
            return ["en"]
        return list(self.model.supported_languages)

    def decode(self, audio: np.ndarray, *, language: str | None, beam_size: int = 1,
               prefix: str = "", word_timestamps: bool = False, offset_s: float = 0.0,
               prompt: str = "") -> Transcript:
        """Transcribe one utterance window (at most ~30 s). ``language=None`` detects it.
        ``prompt``: text the decoder is conditioned on (a term list, earlier text), as
        Whisper's previous-text slot; kept with a ``prefix``, unlike faster-whisper's hotwords."""
        started = time.perf_counter()
        if not self.multilingual:
            language = "en"
        audio_s = len(audio) / SAMPLE_RATE
        segments, info = self.model.transcribe(
            audio, language=language, beam_size=beam_size, best_of=1, temperature=0.0,
            condition_on_previous_text=False, without_timestamps=not word_timestamps,
            word_timestamps=word_timestamps, prefix=prefix or None,
            initial_prompt=prompt_tokens(self.model.hf_tokenizer, prompt) if prompt else None,
            max_new_tokens=min(220, int(TOKENS_PER_AUDIO_S * audio_s) + 8 + len(prefix.split()) * 2),
            compression_ratio_threshold=None, log_prob_threshold=LOW_LOGPROB,
            no_speech_threshold=NO_SPEECH_PROB, vad_filter=False)
        texts, words = [], []
        for segment in segments:
            if not _plausible(segment):
                continue
            texts.append(segment.text.strip())
            for w in segment.words or ():
                words.append(Word(w.word.strip(), offset_s + w.start, offset_s + w.end, w.probability))
        text = " ".join(t for t in texts if t)
        if prompt and repeats_prompt(text, prompt):  # the prompt copied out, not heard: decode without it
            return self.decode(audio, language=language, beam_size=beam_size, prefix=prefix,
                               word_timestamps=word_timestamps, offset_s=offset_s)
        return Transcript(text=text, language=info.language, words=words,
                          decode_s=time.perf_counter() - started)

    def decode_short(self, audio: np.ndarray, *, language: str | None, prefix: str = "",
                     beam_size: int = 1, prompt: str = "") -> Transcript:
        """Transcribe one utterance window on a short encoder window (the default
        margin, ``ShortWindow``); no word timings (those need ``decode``). Detecting
        the language takes the full 30 s window."""
        return self.decode_batch([ShortWindow(audio, language, prefix, prompt=prompt)], beam_size=beam_size)[0]

    def decode_batch(self, windows: list[ShortWindow], *, beam_size: int = 1) -> list[Transcript]:
        """``decode_short`` for several windows, those with the same encoder window in
        one beam search (cheaper per window than a search each). Each window is
        encoded on its own (on CPU one encoder call for several windows cost more per
        window than separate calls) on the encoder window its own length gives
        (``window_frames``), so a window decodes to the same text alone or in a batch:
        the batch a final lands in depends on the load, its words must not. A
        window without a language on a multilingual model is decoded alone (its
        language is detected on the full 30 s window). Windows whose context (their
        previous-text prompt) has another length are searched apart: CTranslate2
        needs the start-of-transcript token at one position in a batch.

        Goes to CTranslate2 directly because faster-whisper always pads to 30 s.
        Applies the same plausibility filters as ``decode``.
        """
        import ctranslate2

        detect = [i for i, w in enumerate(windows) if self.multilingual and w.language is None]
        keys = [("detect", i) if i in detect else
                (w.full, window_frames(w), len(prompt_tokens(self.model.hf_tokenizer, w.prompt)))
                for i, w in enumerate(windows)]
        if len(set(keys)) > 1:
            done: dict[int, Transcript] = {}
            for key in dict.fromkeys(keys):
                group = [i for i, k in enumerate(keys) if k == key]
                done.update(zip(group, self.decode_batch([windows[i] for i in group], beam_size=beam_size),
                                strict=True))
            return [done[i] for i in range(len(windows))]
        started = time.perf_counter()
        model = self.model
        frames = 3000 if detect else window_frames(windows[0])
        # (language detection is only reliable on the 30 s window it was trained on)
        # On a short window the margin is silence in the audio, not zeros in the features
        # (which is what faster-whisper pads with): the log-mel of silence is what Whisper
        # was trained to see after speech, and on short windows it gives fewer errors. The
        # full window is padded as faster-whisper pads it, so it decodes as offline does.
        samples = 0 if windows[0].full else frames * SAMPLE_RATE // FRAMES_PER_S
        padded = []
        for w in windows:
            features = model.feature_extractor(np.pad(w.audio, (0, max(0, samples - len(w.audio)))))[:, :-1]
            padded.append(np.ascontiguousarray(_pad_or_trim(features, frames)[None], dtype=np.float32))
        if len(padded) == 1:
            encoded = model.model.encode(ctranslate2.StorageView.from_array(padded[0]), to_cpu=True)
        else:
            parts = [np.asarray(model.model.encode(ctranslate2.StorageView.from_array(p), to_cpu=True))
                     for p in padded]
            encoded = ctranslate2.StorageView.from_array(np.concatenate(parts))
        languages = ["en" if not self.multilingual else (w.language or "") for w in windows]
        if detect:
            languages = [model.model.detect_language(encoded)[0][0][0].strip("<|>")]
        tokenizers = [self._tokenizer(lang) for lang in languages]
        prompts = [model.get_prompt(tok, prompt_tokens(model.hf_tokenizer, w.prompt), without_timestamps=True,
                                    prefix=w.prefix or None)
                   for tok, w in zip(tokenizers, windows, strict=True)]
        # the result holds the prefix tokens, not the start tokens before them
        lengths = [len(p) + _max_new_tokens(w) for p, w in zip(prompts, windows, strict=True)]
        limits = [n - len(p) + len(tok.encode(" " + w.prefix.strip())) if w.prefix else n - len(p)
                  for n, p, tok, w in zip(lengths, prompts, tokenizers, windows, strict=True)]
        results = model.model.generate(encoded, prompts, beam_size=beam_size, max_length=max(lengths),
                                       return_scores=True, return_no_speech_prob=True, suppress_blank=True,
                                       suppress_tokens=[-1])
        each = (time.perf_counter() - started) / len(windows)
        out = []
        for result, tok, limit, language in zip(results, tokenizers, limits, languages, strict=True):
            tokens = [t for t in result.sequences_ids[0][:limit] if t < tok.eot]
            out.append(_short_transcript(tok.decode(tokens).strip(), len(tokens), result, language, each))
        # a result that copies its prompt out (Whisper's known failure with a context) is decoded again without it
        again = [i for i, (w, r) in enumerate(zip(windows, out, strict=True))
                 if w.prompt and repeats_prompt(r.text, w.prompt)]
        if again:
            redone = self.decode_batch([replace(windows[i], prompt="") for i in again], beam_size=beam_size)
            for i, transcript in zip(again, redone, strict=True):
                out[i] = transcript
        return out

    def _tokenizer(self, language: str) -> Any:
        from faster_whisper.tokenizer import Tokenizer

        key = language
        if key not in self._tokenizers:
            self._tokenizers[key] = Tokenizer(self.model.hf_tokenizer, self.multilingual, task="transcribe",
                                              language=language)
        return self._tokenizers[key]


def window_frames(window: ShortWindow) -> int:
    """The encoder window (feature frames) ``decode_batch`` gives ``window``."""
    return FULL_WINDOW_FRAMES if window.full else short_window_frames(len(window.audio), window.margin_s)


def short_window_frames(samples: int, margin_s: int) -> int:
    """The encoder window (in feature frames) of an utterance of ``samples``: its
    length rounded up to a second, plus ``margin_s`` of silence."""
    seconds = -(-samples // SAMPLE_RATE)
    return min(FULL_WINDOW_FRAMES, (seconds + margin_s) * FRAMES_PER_S)


@dataclass
class ShortWindow:
    """One utterance window for ``decode_batch``.

    Streaming decodes encode the utterance plus ``margin_s`` of silence instead of
    Whisper's full 30 s window: the encoder is most of a decode's cost, and its
    attention grows with the square of the window.
    """

    audio: np.ndarray
    language: str | None
    prefix: str = ""
    full: bool = False  # Whisper's own 30 s window, features padded with zeros (as offline decoding does)
    margin_s: int = PolicyTuning.short_window_margin_s  # the streaming default; a stream's job passes its own
    prompt: str = ""  # text to condition on (terms, earlier text): Whisper's previous-text slot


def _max_new_tokens(window: ShortWindow) -> int:
    return min(220, int(TOKENS_PER_AUDIO_S * len(window.audio) / SAMPLE_RATE) + 8 + len(window.prefix.split()) * 2)


def _pad_or_trim(features: np.ndarray, frames: int) -> np.ndarray:
    from faster_whisper.audio import pad_or_trim

    return pad_or_trim(features, frames)


def _short_transcript(text: str, n_tokens: int, result: Any, language: str, decode_s: float) -> Transcript:
    from faster_whisper.transcribe import get_compression_ratio

    avg_logprob = result.scores[0] * n_tokens / (n_tokens + 1)
    implausible = (get_compression_ratio(text) > MAX_COMPRESSION_RATIO if text else False) or (
        result.no_speech_prob > NO_SPEECH_PROB and avg_logprob < LOW_LOGPROB) or result.no_speech_prob > NO_SPEECH_SURE
    return Transcript(text="" if implausible else text, language=language, decode_s=decode_s)


def _plausible(segment) -> bool:
    if segment.compression_ratio > MAX_COMPRESSION_RATIO:
        return False
    if segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < LOW_LOGPROB:
        return False
    if segment.no_speech_prob > NO_SPEECH_SURE:
        return False
    words = segment.words or ()
    if len(words) >= 3:
        # Whisper pads every window to 30 s; at the very end of the audio it can "hear"
        # a sentence in 0.1 s of padding. Nobody speaks faster than ~6 words a second.
        duration = max(words[-1].end - words[0].start, 0.01)
        if len(words) / duration > MAX_WORDS_PER_S:
            return False
    return bool(segment.text.strip())
