"""The dictation benchmark's clips: synthesized speech framed by silence, with its reference text.

76 sentences, 743 words: the 16 Harvard sentences (Piper joe at three speeds,
espeak-ng with three voices, clean and with white noise at 10 dB SNR), then the
60 everyday sentences of tests/support/passages.py (names, numbers, times,
questions) in six voices in turn, every fourth clip noisy, 36 alone and 24 as
two-sentence clips whose sentences are 0.3 s apart (one utterance: shorter
than the 500 ms silence window) or 1.0 s (two). Piper's synthesis is random,
so every run makes slightly different audio; the streaming and offline sides
of one run hear the same clips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.support.passages import PASSAGES
from tests.support.speech import SENTENCES, add_noise, espeak_say, piper_say, resample

RATE = 16000
LEAD_S = 0.6
TRAIL_S = 1.6
VOICED_RMS = 0.01


@dataclass
class Clip:
    name: str
    text: str
    audio: np.ndarray  # 16 kHz, with the lead and trailing silence
    speech_start_s: float
    speech_ends_s: list[float]  # where each sentence's last voiced sample is


def voiced_bounds(audio: np.ndarray) -> tuple[float, float]:
    frame = RATE // 100
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    voiced = np.nonzero(rms > VOICED_RMS)[0]
    return voiced[0] * frame / RATE, (voiced[-1] + 1) * frame / RATE


VOICES = (("piper", 1.0), ("piper", 1.25), ("piper", 0.85), ("espeak", "en-us"), ("espeak", "en-gb"),
          ("espeak", "en-us+f3"))
PAIR_GAPS_S = (0.3, 1.0)  # inside one utterance (shorter than the 500 ms silence), or two utterances
SENTENCE_EDGE_S = 0.05  # kept around the voiced part of each sentence of a two-sentence clip


def say(engine: str, text: str, variant: float | str, espeak_wpm: int = 165,
        steady: bool = False) -> tuple[np.ndarray, str]:
    """One sentence at 16 kHz and the voice's name (espeak-ng at ``espeak_wpm`` words a
    minute; ``steady``: Piper without its random noise, the same audio every time)."""
    if engine == "piper":
        assert isinstance(variant, float)
        samples, rate = piper_say(text, length_scale=variant, steady=steady)
        return resample(samples, rate), f"piper x{1 / variant:.2f}"
    assert isinstance(variant, str)
    samples, rate = espeak_say(text, voice=variant, words_per_minute=espeak_wpm)
    return resample(samples, rate), f"espeak {variant}"


def make_clip(texts: list[str], engine: str, variant: float | str, snr: float | None, gap_s: float,
              seed: int, espeak_wpm: int = 165) -> Clip:
    """One or two sentences in one voice, framed by silence; two are joined by ``gap_s`` of silence."""
    parts, ends, name = [np.zeros(int(LEAD_S * RATE), np.float32)], [], ""
    for n, text in enumerate(texts):
        speech, name = say(engine, text, variant, espeak_wpm)
        if len(texts) > 1:
            start, end = voiced_bounds(speech)
            speech = speech[max(0, int((start - SENTENCE_EDGE_S) * RATE)):int((end + SENTENCE_EDGE_S) * RATE)]
            if n:
                parts.append(np.zeros(int(gap_s * RATE), np.float32))
        offset = sum(len(p) for p in parts) / RATE
        start, end = voiced_bounds(speech)
        ends.append(offset + end)
        if n == 0:
            speech_start = offset + start
        parts.append(speech)
    parts.append(np.zeros(int(TRAIL_S * RATE), np.float32))
    audio = np.concatenate(parts)
    if snr is not None:
        audio = add_noise(audio, snr, seed=seed)
        name += f" {snr:.0f} dB"
    if len(texts) > 1:
        name += f" two, {gap_s:.1f} s gap"
    return Clip(name, " ".join(texts), audio, speech_start, ends)


def harvard_plan() -> list[tuple[list[str], str, float | str, float | None, float]]:
    """The 16 Harvard sentences: Piper at three speeds and espeak-ng, clean and at 10 dB SNR."""
    plan: list[tuple[list[str], str, float | str, float | None, float]] = []
    for i, text in enumerate(SENTENCES):
        if i < 4:
            plan.append(([text], "piper", 1.0, None, 0.0))
        elif i < 6:
            plan.append(([text], "piper", 1.25, None, 0.0))
        elif i < 8:
            plan.append(([text], "piper", 0.85, None, 0.0))
        elif i < 10:
            plan.append(([text], "piper", 1.0, 10.0, 0.0))
        elif i < 13:
            plan.append(([text], "espeak", ("en-us", "en-gb", "en-us+f3")[i - 10], None, 0.0))
        else:
            plan.append(([text], "espeak", ("en-us", "en-gb", "en-us+f3")[i - 13], 10.0, 0.0))
    return plan


def passage_plan() -> list[tuple[list[str], str, float | str, float | None, float]]:
    """The 60 everyday sentences: 36 alone and 12 two-sentence clips, the six voices in
    turn, every fourth clip at 10 dB SNR."""
    groups = [[t] for t in PASSAGES[:36]] + [list(PASSAGES[i:i + 2]) for i in range(36, len(PASSAGES), 2)]
    plan: list[tuple[list[str], str, float | str, float | None, float]] = []
    for i, texts in enumerate(groups):
        engine, variant = VOICES[i % len(VOICES)]
        plan.append((texts, engine, variant, 10.0 if i % 4 == 3 else None, PAIR_GAPS_S[i % 2]))
    return plan


def make_clips(limit: int | None = None) -> list[Clip]:
    """The accuracy set (its first ``limit`` clips): the Harvard clips first (the capacity
    runs use the first four), then the everyday sentences."""
    plan = (harvard_plan() + passage_plan())[:limit]
    return [make_clip(texts, engine, variant, snr, gap, seed)
            for seed, (texts, engine, variant, snr, gap) in enumerate(plan)]


def clip_kind(clip: Clip) -> str:
    kind = ("piper" if clip.name.startswith("piper") else "espeak") + (" noisy" if "dB" in clip.name else " clean")
    return kind + (", two sentences" if len(clip.speech_ends_s) > 1 else "")


def concat_clips(clips: list[Clip]) -> Clip:
    audio = np.concatenate([c.audio for c in clips])
    text = " ".join(c.text for c in clips)
    offsets = np.cumsum([0] + [len(c.audio) for c in clips[:-1]]) / RATE
    ends = [float(o) + e for o, c in zip(offsets, clips, strict=True) for e in c.speech_ends_s]
    return Clip("concat", text, audio, clips[0].speech_start_s, ends)


# The quick-paced set: sentences of three phrases, said by Piper at rates 1.0 and 1.25,
# each phrase trimmed to its voiced part and joined to the next by a short pause
# (0.12-0.36 s, all shorter than the 500 ms silence window): one utterance per
# clip with many pauses inside it, where a speculative final starts and is
# dropped, and where a partial sees a phrase end at the edge of its audio.
QUICK_PHRASES = (
    ("Our neighbor Thomas", "fixed the fence on Sunday", "while his kids painted the shed."),
    ("Please remind Maria", "to pack three sweaters", "before the hiking trip."),
    ("The morning train", "was twenty minutes late", "so we walked to the office."),
    ("After the storm", "the river rose quickly", "and flooded the lower road."),
    ("My sister bought", "a small blue bicycle", "for her daughter's birthday."),
    ("When the bell rang", "the students hurried out", "into the bright courtyard."),
    ("The old baker", "opens his shop at five", "and sells out by noon."),
    ("If you see Daniel", "tell him the meeting moved", "to Thursday afternoon."),
    ("We planted tomatoes", "along the garden wall", "and watered them every evening."),
    ("The pilot announced", "a short delay", "because of heavy fog in Denver."),
    ("Last winter", "the heating broke twice", "and we slept in thick coats."),
    ("Grandpa tells stories", "about the farm he grew up on", "near the mountains."),
    ("The museum guide", "showed us a painting", "that was almost four hundred years old."),
    ("Before dinner", "wash your hands", "and set the table for six."),
    ("The coach said", "we played well", "but lost the game in the final minute."),
    ("Somebody left", "a green umbrella", "on the bus this morning."),
    ("The doctor asked", "how long the cough had lasted", "and listened to my chest."),
    ("On Friday nights", "the whole family", "watches a movie together."),
    ("The little dog", "chased a squirrel", "up the tall oak tree."),
    ("Send me the report", "by tomorrow morning", "so I can read it on the train."),
)
QUICK_RATES = (1.0, 1.25)
QUICK_GAPS_S = (0.12, 0.2, 0.28, 0.36)
PHRASE_EDGE_S = 0.03
QUICK_TRAIL_S = 1.5


def make_quick_clip(phrases: tuple[str, ...], rate: float, seed: int, snr: float | None = None,
                    steady: bool = False) -> Clip:
    """One sentence said phrase by phrase at ``rate``, the phrases joined by short pauses
    (``steady``: Piper without its random noise, the same audio every time)."""
    parts = [np.zeros(int(LEAD_S * RATE), np.float32)]
    speech_start = 0.0
    for n, phrase in enumerate(phrases):
        samples, piper_rate = piper_say(phrase, length_scale=1 / rate, steady=steady)
        speech = resample(samples, piper_rate)
        start, end = voiced_bounds(speech)
        speech = speech[max(0, int((start - PHRASE_EDGE_S) * RATE)):int((end + PHRASE_EDGE_S) * RATE)]
        if n:
            parts.append(np.zeros(int(QUICK_GAPS_S[(seed + n) % len(QUICK_GAPS_S)] * RATE), np.float32))
        else:
            speech_start = LEAD_S + min(start, PHRASE_EDGE_S)
        parts.append(speech)
    speech_end = sum(len(p) for p in parts) / RATE - PHRASE_EDGE_S
    parts.append(np.zeros(int(QUICK_TRAIL_S * RATE), np.float32))
    audio = np.concatenate(parts)
    name = f"quick piper x{rate:.2f}"
    if snr is not None:
        audio = add_noise(audio, snr, seed=seed)
        name += f" {snr:.0f} dB"
    return Clip(name, " ".join(phrases), audio, speech_start, [speech_end])


def make_quick_clips(limit: int | None = None, snr: float | None = None, rendition: int = 0) -> list[Clip]:
    """The quick-paced set: every sentence at both rates (rate 1.0 first), 40 clips, 492
    words. Another ``rendition`` is new audio (Piper's synthesis is random) with the
    pauses in another order and other noise."""
    plan = [(p, r) for r in QUICK_RATES for p in QUICK_PHRASES][:limit]
    return [make_quick_clip(p, r, seed + 1000 * rendition, snr) for seed, (p, r) in enumerate(plan)]


SENTENCE_TRAIL_S = 1.5


def whole_sentence_clips(count: int = 10) -> list[tuple[Clip, float]]:
    """Sentences of the quick-paced set said whole at both rates, as Piper writes them
    (untrimmed), each followed by 1.5 s of silence; each with how long Piper's audio runs
    past its last voiced sample. ``speech_ends_s`` is the end of Piper's audio."""
    clips = []
    for rate in QUICK_RATES:
        for phrases in QUICK_PHRASES[:count]:
            speech, name = say("piper", " ".join(phrases), 1 / rate)
            trailing = len(speech) / RATE - voiced_bounds(speech)[1]
            audio = np.concatenate([np.zeros(int(LEAD_S * RATE), np.float32), speech,
                                    np.zeros(int(SENTENCE_TRAIL_S * RATE), np.float32)])
            clips.append((Clip(f"sentence {name}", " ".join(phrases), audio, LEAD_S,
                               [LEAD_S + len(speech) / RATE]), trailing))
    return clips


# Short single sentences (Harvard lists, public domain) that no other set uses:
# one clause, no pause inside, 5-9 words. On these a short encoder window misreads
# a word or two ("Sickness" -> "Signis") that the 30 s window reads right.
SHORT_SENTENCES = (
    "Sickness kept him home the third week.",
    "The lazy cow lay in the cool grass.",
    "Lift the square stone over the fence.",
    "The rope will bind the seven books at once.",
    "Hop over the fence and plunge in.",
    "Mesh wire keeps chicks inside.",
    "The frosty air passed through the coat.",
    "The crooked maze failed to fool the mouse.",
    "Adding fast leads to wrong sums.",
    "The show was a flop from the very start.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.",
    "The small pup gnawed a hole in the sock.",
    "The swan dive was far short of perfect.",
    "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.",
    "The colt reared and threw the tall rider.",
    "Read verse out loud for pleasure.",
    "A cup of sugar makes sweet fudge.",
)
SHORT_VOICES: tuple[tuple[str, float | str], ...] = (
    ("piper", 1.0), ("piper", 0.8), ("piper", 1.2), ("espeak", "en-us"), ("espeak", "en-gb"),
    ("espeak", "en-us+f3"))
SHORT_TRAIL_S = 1.5


def short_sentence_plan() -> list[tuple[str, str, float | str]]:
    """Every short sentence in Piper at its three length scales (1.0, 0.8 faster, 1.2
    slower), then in one of the three espeak-ng voices in turn: 80 clips, 560 words."""
    plan: list[tuple[str, str, float | str]] = []
    for i, text in enumerate(SHORT_SENTENCES):
        plan += [(text, engine, variant) for engine, variant in SHORT_VOICES[:3]]
        engine, variant = SHORT_VOICES[3 + i % 3]
        plan.append((text, engine, variant))
    return plan


def make_short_clips(limit: int | None = None, snr: float | None = None, rendition: int = 0) -> list[Clip]:
    """The short-sentence set (its first ``limit`` clips), each sentence said whole,
    framed by 0.6 s of silence before and 1.5 s after; ``snr``: with white noise.
    Another ``rendition`` is new audio (Piper is random; espeak-ng another rate)."""
    return [make_short_clip(text, engine, variant, snr=snr, seed=seed + 1000 * rendition,
                            espeak_wpm=(165, 155, 175)[rendition % 3])
            for seed, (text, engine, variant) in enumerate(short_sentence_plan()[:limit])]


def make_short_clip(text: str, engine: str, variant: float | str, *, snr: float | None = None, seed: int = 0,
                    espeak_wpm: int = 165, steady: bool = False) -> Clip:
    """One sentence said whole, 0.6 s of silence before and 1.5 s after (``steady``: see ``say``)."""
    speech, name = say(engine, text, variant, espeak_wpm, steady)
    start, end = voiced_bounds(speech)
    audio = np.concatenate([np.zeros(int(LEAD_S * RATE), np.float32), speech,
                            np.zeros(int(SHORT_TRAIL_S * RATE), np.float32)])
    if snr is not None:
        audio = add_noise(audio, snr, seed=seed)
        name += f" {snr:.0f} dB"
    return Clip(f"short {name}", text, audio, LEAD_S + start, [LEAD_S + end])


# The real-speech set: recordings of people with published transcripts
# (tests/support/real_speech.py, bench/REAL_SPEECH.md), fetched once into a cache.
REAL_PASSAGE_SEGMENTS = 4  # consecutive LJSpeech segments read as one passage
REAL_SEGMENT_GAP_S = 0.8  # silence put between them: longer than the 500 ms window, so each ends an utterance
REAL_PAUSE_S = 0.5  # a quiet stretch this long ends a stretch of speech (the default silence window)


def speech_stretches(audio: np.ndarray, pause_s: float = REAL_PAUSE_S) -> tuple[float, list[float]]:
    """Where speech starts and where each stretch of it ends (a stretch ends before a
    quiet of ``pause_s`` or more). Voiced is relative to the recording's loud frames,
    since a real recording's background is not digital silence."""
    frame = RATE // 100
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    voiced = np.nonzero(rms > max(VOICED_RMS, 0.1 * float(np.percentile(rms, 95))))[0]
    gaps = np.nonzero(np.diff(voiced) * frame / RATE >= pause_s)[0]
    ends = [float(voiced[i] + 1) * frame / RATE for i in gaps] + [float(voiced[-1] + 1) * frame / RATE]
    return float(voiced[0]) * frame / RATE, ends


def real_clip(name: str, text: str, parts: list[np.ndarray], gap_s: float = REAL_SEGMENT_GAP_S) -> Clip:
    """Recordings joined by ``gap_s`` of silence, framed like the other sets' clips."""
    joined: list[np.ndarray] = [np.zeros(int(LEAD_S * RATE), np.float32)]
    for n, part in enumerate(parts):
        if n:
            joined.append(np.zeros(int(gap_s * RATE), np.float32))
        joined.append(part)
    joined.append(np.zeros(int(SHORT_TRAIL_S * RATE), np.float32))
    audio = np.concatenate(joined)
    start, ends = speech_stretches(audio)
    return Clip(name, text, audio, start, ends)


def make_real_clips(limit: int | None = None) -> list[Clip]:
    """The real-speech set (its first ``limit`` clips): JFK's "ask not" (one sentence
    with three long pauses), one LibriSpeech sentence, then LJSpeech LJ001-0001..0032
    as eight passages of four consecutive segments: 10 clips, 4.1 minutes of
    recordings (4.7 with the framing silence), 3 speakers, 631 words."""
    from tests.support.real_speech import JFK, LIBRISPEECH, LJSPEECH, load

    clips = [real_clip("real speech jfk", JFK.text, [load(JFK)]),
             real_clip(f"real speech librispeech {LIBRISPEECH.name}", LIBRISPEECH.text, [load(LIBRISPEECH)])]
    for first in range(0, len(LJSPEECH), REAL_PASSAGE_SEGMENTS):
        passage = LJSPEECH[first:first + REAL_PASSAGE_SEGMENTS]
        clips.append(real_clip(f"real speech ljspeech {passage[0].name}..{passage[-1].name[-4:]}",
                               " ".join(r.text for r in passage), [load(r) for r in passage]))
    return clips[:limit]
