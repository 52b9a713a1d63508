"""The recognizer's input resampler: chunking never changes the output, tones come
out where they belong, what lies above the new Nyquist is rejected, and it holds
back only its look-ahead."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.resampling import LowDelayResampler

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
