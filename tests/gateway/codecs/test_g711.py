"""G.711 against libsndfile's independent implementation."""

from __future__ import annotations

import io

import numpy as np
import soundfile

from gateway.codecs.g711 import alaw_decode, alaw_encode, mulaw_decode, mulaw_encode
from tests.support.media import libsndfile_raw, tone

ALL_CODES = bytes(range(256))
ALL_PCM = np.arange(-32768, 32768, dtype=np.int16)


def libsndfile_encode(pcm: np.ndarray, subtype: str) -> np.ndarray:
    buf = io.BytesIO()
    soundfile.write(buf, pcm, 8000, format="RAW", subtype=subtype)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def test_every_mulaw_byte_decodes_as_libsndfile_does():
    assert np.array_equal(mulaw_decode(ALL_CODES), libsndfile_raw(ALL_CODES, "ULAW", 8000))


def test_every_alaw_byte_decodes_as_libsndfile_does():
    assert np.array_equal(alaw_decode(ALL_CODES), libsndfile_raw(ALL_CODES, "ALAW", 8000))


def test_every_16_bit_sample_encodes_to_mulaw_as_libsndfile_does():
    ours = np.frombuffer(mulaw_encode(ALL_PCM / 32767.0), dtype=np.uint8)
    assert np.array_equal(ours, libsndfile_encode(ALL_PCM, "ULAW"))


def test_alaw_encoding_follows_the_itu_rounding_and_differs_from_libsndfile_only_at_step_edges():
    ours = np.frombuffer(alaw_encode(ALL_PCM / 32767.0), dtype=np.uint8)
    theirs = libsndfile_encode(ALL_PCM, "ALAW")
    differ = np.nonzero(ours != theirs)[0]
    # ITU-T G.191 takes the one's complement of a negative sample (-16 -> 15), libsndfile
    # its negation: the two disagree exactly on negative multiples of a step, by one code.
    assert len(differ) == 127
    assert all(ALL_PCM[i] < 0 and ALL_PCM[i] % 16 == 0 for i in differ)
    assert np.abs(alaw_decode(bytes(ours[differ])) - alaw_decode(bytes(theirs[differ]))).max() <= 1024 / 32768


def test_round_trips_keep_speech_within_g711_quantisation():
    x = tone(0.5, 8000)
    for encode, decode in ((mulaw_encode, mulaw_decode), (alaw_encode, alaw_decode)):
        y = decode(encode(x))
        assert y.dtype == np.float32 and len(y) == len(x)
        snr = 10 * np.log10(np.sum(x ** 2) / np.sum((x - y) ** 2))
        assert snr > 30  # G.711 gives ~38 dB on a loud tone


def test_out_of_range_samples_clip():
    assert mulaw_decode(mulaw_encode(np.array([5.0, -5.0], np.float32))).tolist() == [32124 / 32768, -32124 / 32768]
    assert alaw_decode(alaw_encode(np.array([5.0, -5.0], np.float32))).tolist() == [32256 / 32768, -32256 / 32768]
