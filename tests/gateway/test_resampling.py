"""The recognizer's input resampler: chunking never changes the output, tones come
out where they belong, what lies above the new Nyquist is rejected, and it holds
back only its look-ahead."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.codecs.g711 import mulaw_decode
from gateway.resampling import BLOCK, LowDelayResampler
from tests.support.stream_bombs import address_space_cap, mulaw_message

RATES = [8000, 11025, 22050, 24000, 32000, 44100, 48000]


def tones(freqs: list[float], rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return sum(0.4 * np.sin(2 * np.pi * f * t) for f in freqs).astype(np.float32)


def whole(resampler: LowDelayResampler, samples: np.ndarray) -> np.ndarray:
    return np.concatenate([resampler.feed(samples), resampler.flush()])


def db(signal: np.ndarray, reference: np.ndarray) -> float:
    return 20 * math.log10(np.sqrt(np.mean(signal ** 2)) / np.sqrt(np.mean(reference ** 2)))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(RATES), st.lists(st.integers(min_value=0, max_value=700), min_size=1, max_size=40))
def test_any_chunking_gives_the_output_of_one_call(rate: int, sizes: list[int]) -> None:
    samples = np.random.default_rng(len(sizes)).standard_normal(sum(sizes)).astype(np.float32) * 0.3
    chunked = LowDelayResampler(rate, 16000)
    parts, at = [], 0
    for size in sizes:
        parts.append(chunked.feed(samples[at:at + size]))
        at += size
    parts.append(chunked.flush())
    out = np.concatenate(parts)
    assert np.array_equal(out, whole(LowDelayResampler(rate, 16000), samples))
    assert len(out) == -(-len(samples) * 16000 // rate)  # every input sample covered, none invented


@pytest.mark.parametrize("rate", RATES)
def test_speech_band_tones_come_out_as_the_same_tones_at_16_khz(rate: int) -> None:
    freqs = [220.0, 1000.0, min(3400.0, rate * 0.35)]  # up to 70 % of an 8 kHz stream's Nyquist
    out = whole(LowDelayResampler(rate, 16000), tones(freqs, rate, 1.0))
    expected = tones(freqs, 16000, 1.0)
    inner = slice(200, 16000 - 200)  # away from the zeros assumed before and after the stream
    assert db(out[inner] - expected[inner], expected[inner]) < -70


@pytest.mark.parametrize("rate", [22050, 24000, 32000, 44100, 48000])
def test_what_lies_above_8_khz_does_not_fold_into_speech(rate: int) -> None:
    tone = tones([9500.0], rate, 1.0)
    out = whole(LowDelayResampler(rate, 16000), tone)
    assert db(out[200:-200], tone) < -70


@pytest.mark.parametrize(("rate", "held_ms"), [(8000, 2.25), (24000, 1.125), (48000, 1.1042)])
def test_only_the_look_ahead_is_held_back(rate: int, held_ms: float) -> None:
    resampler = LowDelayResampler(rate, 16000)
    assert resampler.delay_s * 1000 == pytest.approx(held_ms, abs=0.01)
    given_ = rate // 2  # 500 ms
    out = resampler.feed(np.zeros(given_, dtype=np.float32))
    held = given_ * 16000 / rate - len(out)
    assert held == pytest.approx(resampler.delay_s * 16000, abs=1.0)


def test_the_same_rate_passes_through_untouched() -> None:
    samples = np.random.default_rng(0).standard_normal(1234).astype(np.float32)
    resampler = LowDelayResampler(16000, 16000)
    assert np.array_equal(resampler.feed(samples), samples)
    assert len(resampler.flush()) == 0


@pytest.mark.parametrize("rate", [8000, 44100, 48000])
def test_a_large_feed_gives_the_samples_of_small_feeds(rate: int) -> None:
    samples = np.random.default_rng(rate).standard_normal(rate * 3 + 17).astype(np.float32) * 0.3
    small = LowDelayResampler(rate, 16000)
    parts = [small.feed(samples[at:at + 160]) for at in range(0, len(samples), 160)]
    large = LowDelayResampler(rate, 16000)
    assert len(large.feed(samples)) > 8 * BLOCK  # many blocks in one call
    assert np.array_equal(np.concatenate([*parts, small.flush()]), whole(LowDelayResampler(rate, 16000), samples))


def test_a_megabyte_of_mulaw_resamples_in_memory_of_its_own_size() -> None:
    """131 s of 8 kHz audio in one call: once a row of 70 taps per output sample
    (a tracemalloc peak of 965 MB); now the input, the output and one block."""
    samples = mulaw_decode(mulaw_message())  # 4 MiB of float32
    resampler = LowDelayResampler(8000, 16000)
    with address_space_cap():
        tracemalloc.start()
        try:
            out = resampler.feed(samples)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(out) == 2 * (len(samples) - round(resampler.delay_s * 8000))  # all but the look-ahead
    assert peak < 24 * 1024 * 1024
