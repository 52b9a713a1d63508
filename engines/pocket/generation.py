"""The generation contract of Pocket TTS, reproduced from the reference in one place.

- Text: strip, replace characters absent from training, collapse newlines, capitalise
  the first letter, end on sentence punctuation (:func:`prepare_text`).
- Chunking: split on sentence-final tokens (not on decimal points), sub-split long
  sentences on ``,;:``, regroup greedily under ``max_tokens_per_chunk`` (50)
  (:func:`split_text`). Every chunk restarts from the voice state.
- Per chunk: the text prompt pass also samples a latent, which is discarded (it still
  draws its noise); then up to ``ceil((tokens / 3 + 2) * 12.5)`` steps, the first fed
  NaN (= BOS). EOS is the raw logit above ``eos_threshold`` (-4.0, small models -1.0),
  ignored before step 6; the chunk ends ``frames_after_eos`` steps after it, by
  default (3 if the chunk has <= 4 words else 1) + 2. The step that ends the chunk
  is not played.
- Noise: normal with std ``sqrt(temperature)`` (0.3 by default) from the stream's
  generator, ``latent_dim`` values per sampled latent; temperature 0 is exactly zero.
  LSD steps: 1.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import sentencepiece
import torch

FRAME_RATE = 12.5
MIN_FRAMES_BEFORE_EOS = 6
TOKENS_PER_SECOND = 3.0
PADDING_SECONDS = 2.0
ENGLISH_REPLACEMENTS = {"\u2019": "'", "\u2018": "'"}
SMALL_MODEL_REPLACEMENTS = {"\u2013": ",", "\u2014": ",", "\u2019": "'", "\u2018": "'"}

_TERMINAL = ".!?\u2026"
_WEAK = ",;:-\u2013\u2014"
_CLOSERS = "\"'\u201d\u2019)]\u00bb"


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.3
    lsd_steps: int = 1
    eos_threshold: float = -4.0
    frames_after_eos: int | None = None  # None: (3 if <= 4 words else 1) + 2 per chunk
    max_tokens_per_chunk: int = 50
    replace_characters: tuple[tuple[str, str], ...] = tuple(ENGLISH_REPLACEMENTS.items())

    def __post_init__(self) -> None:
        if not (isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 10):
            raise ValueError(f"temperature: must be a number from 0 to 10, got {self.temperature!r}")
        if not (isinstance(self.lsd_steps, int) and 1 <= self.lsd_steps <= 64):
            raise ValueError(f"lsd_steps: must be an integer from 1 to 64, got {self.lsd_steps!r}")
        if self.frames_after_eos is not None and not (
                isinstance(self.frames_after_eos, int) and 0 <= self.frames_after_eos <= 100):
            raise ValueError(f"frames_after_eos: must be an integer from 0 to 100 or None, "
                             f"got {self.frames_after_eos!r}")
        if not (isinstance(self.max_tokens_per_chunk, int) and self.max_tokens_per_chunk >= 1):
            raise ValueError("max_tokens_per_chunk: must be a positive integer, "
                             f"got {self.max_tokens_per_chunk!r}")


class Tokenizer:
    """Sentencepiece unigram model (``tokenizer.model``)."""

    def __init__(self, path: str | Path) -> None:
        self.sp = sentencepiece.SentencePieceProcessor(model_file=str(path))

    @property
    def vocab_size(self) -> int:
        return self.sp.vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def decode(self, tokens: list[int]) -> str:
        return self.sp.decode(tokens)


def prepare_text(text: str, replace_characters: dict[str, str] | None = None) -> tuple[str, int]:
    """Text as the model wants it, and the default frames after EOS (before the +2)."""
    text = text.strip()
    if replace_characters:
        text = " ".join(text.translate(str.maketrans(replace_characters)).split())
        # a deleted quote can leave "Hi?, she said": keep only the sentence mark
        text = re.sub(r"([.!?\u2026])\s*[,;:]", r"\1", text)
    if text == "":
        raise ValueError("text: must contain at least one non-space character")
    text = text.replace("\n", " ").replace("\r", " ").replace("  ", " ")
    guess = 3 if len(text.split()) <= 4 else 1
    if not text[0].isupper():
        text = text[0].upper() + text[1:]
    return _end_on_punctuation(text), guess


def _end_on_punctuation(text: str) -> str:
    core = text.rstrip(_CLOSERS + " ")
    closers = text[len(core):].strip()
    if not core or core[-1] in _TERMINAL:
        return text
    if core[-1] in _WEAK:
        return core.rstrip(_WEAK + " ") + "." + closers
    return text + "."


def _boundaries(tokens: list[int], marks: set[int], tokenizer: Tokenizer | None) -> list[int]:
    """Start index of every segment that follows a run of ``marks`` (plus 0 and the end)."""
    starts, after_mark = [0], False
    for i, token in enumerate(tokens):
        if token in marks:
            after_mark = True
            continue
        if after_mark and not (tokenizer and _after_decimal_point(tokens, i, tokenizer)):
            starts.append(i)
        after_mark = False
    return [*starts, len(tokens)]


def _after_decimal_point(tokens: list[int], start: int, tokenizer: Tokenizer) -> bool:
    before, after = tokenizer.decode(tokens[:start]), tokenizer.decode(tokens[start:])
    return len(before) >= 2 and before[-1] == "." and before[-2].isdigit() and after[:1].isdigit()


def _segments(tokens: list[int], starts: list[int], tokenizer: Tokenizer) -> list[tuple[int, str]]:
    return [(b - a, tokenizer.decode(tokens[a:b])) for a, b in itertools.pairwise(starts)]


def split_text(tokenizer: Tokenizer, text: str, max_tokens: int = 50,
               replace_characters: dict[str, str] | None = None) -> list[str]:
    """Chunks of whole sentences of at most ``max_tokens`` tokens (when possible)."""
    text = prepare_text(text, replace_characters)[0].strip()
    tokens = tokenizer.encode(text)
    sentence_marks = set(tokenizer.encode(".!...?")[1:])
    sentences = _segments(tokens, _boundaries(tokens, sentence_marks, tokenizer), tokenizer)
    clause_marks = set(tokenizer.encode(",;:")[1:])
    pieces: list[tuple[int, str]] = []
    for count, sentence in sentences:
        if count > max_tokens:
            sub = tokenizer.encode(sentence.strip())
            parts = _segments(sub, _boundaries(sub, clause_marks, None), tokenizer)
            if len(parts) > 1:
                pieces.extend(parts)
                continue
        pieces.append((count, sentence))
    chunks: list[str] = []
    current, current_count = "", 0
    for count, piece in pieces:
        if current == "":
            current, current_count = piece, count
        elif current_count + count > max_tokens:
            chunks.append(current.strip())
            current, current_count = piece, count
        else:
            current, current_count = current + " " + piece, current_count + count
    if current != "":
        chunks.append(current.strip())
    return chunks


@dataclass
class ChunkPlan:
    tokens: list[int]
    frames_after_eos: int
    max_steps: int


def plan_chunks(tokenizer: Tokenizer, text: str, settings: GenerationSettings) -> list[ChunkPlan]:
    """Every chunk of ``text`` with its prompt tokens and its stopping rule."""
    replacements = dict(settings.replace_characters)
    plans = []
    for chunk in split_text(tokenizer, text, settings.max_tokens_per_chunk, replacements):
        prepared, guess = prepare_text(chunk, replacements)
        tokens = tokenizer.encode(prepared)
        after = settings.frames_after_eos if settings.frames_after_eos is not None else guess + 2
        seconds = len(tokens) / TOKENS_PER_SECOND + PADDING_SECONDS
        plans.append(ChunkPlan(tokens, after, math.ceil(seconds * FRAME_RATE)))
    return plans


class Utterance:
    """The per-stream state machine: which chunk, which step, when to stop.

    The batch calls :meth:`begin_chunk` (then runs the text prompt), then per step
    :meth:`noise` -> model -> :meth:`accept`, until :attr:`finished`.
    """

    def __init__(self, plans: list[ChunkPlan], settings: GenerationSettings, latent_dim: int,
                 generator: torch.Generator | None) -> None:
        if not plans:
            raise ValueError("text: nothing to say")
        self.plans, self.settings, self.latent_dim = plans, settings, latent_dim
        self.generator = generator
        self.chunk = -1
        self.step = 0
        self.eos_step: int | None = None
        self.finished = False
        self.chunk_done = True

    @property
    def plan(self) -> ChunkPlan:
        return self.plans[self.chunk]

    def begin_chunk(self) -> list[int]:
        """Move to the next chunk; returns its prompt tokens."""
        self.chunk += 1
        self.step, self.eos_step, self.chunk_done = 0, None, False
        self.noise()  # the text prompt pass samples a latent nobody uses
        return self.plan.tokens

    def noise(self) -> torch.Tensor:
        std = self.settings.temperature ** 0.5
        out = torch.zeros(self.latent_dim)
        if std > 0:
            out.normal_(0.0, std, generator=self.generator)
        return out

    def accept(self, eos_logit: float) -> bool:
        """Record step ``self.step``'s EOS logit; True if its latent is to be played."""
        step, plan = self.step, self.plan
        if eos_logit > self.settings.eos_threshold and self.eos_step is None \
                and step >= MIN_FRAMES_BEFORE_EOS:
            self.eos_step = step
        if self.eos_step is not None and step >= self.eos_step + plan.frames_after_eos:
            self._end_chunk()
            return False
        self.step += 1
        if self.step >= plan.max_steps:
            self._end_chunk()
        elif self.eos_step is not None and self.step >= self.eos_step + plan.frames_after_eos:
            self.noise()  # the next step would be computed and dropped: only draw its noise
            self._end_chunk()
        return True

    def _end_chunk(self) -> None:
        self.chunk_done = True
        if self.chunk + 1 >= len(self.plans):
            self.finished = True
