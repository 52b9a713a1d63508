from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from gateway.audio import (
    AudioFormatError,
    AudioTooLong,
    Encoding,
    PcmDecoder,
    StreamResampler,
    decode,
    encode,
    parse_encoding,
    parse_rate,
    read_wav,
    resample,
    wav_header,
    write_wav,
)


def tone(n: int, rate: int = 16000, freq: float = 440.0) -> np.ndarray:
    t = np.arange(n) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_s16_decoder_keeps_an_odd_trailing_byte_for_the_next_message():
    samples = tone(101)
    data = encode(samples, Encoding.S16LE)
    dec = PcmDecoder(Encoding.S16LE)
    first = dec.feed(data[:51])  # 25 samples + half of one
    assert len(first) == 25 and dec.pending_bytes == 1
    rest = dec.feed(data[51:])
    assert len(rest) == 76 and dec.pending_bytes == 0
    np.testing.assert_array_equal(np.concatenate([first, rest]), decode(data, Encoding.S16LE))


def test_f32_decoder_handles_split_samples_and_rejects_nan():
    samples = tone(10)
    data = encode(samples, Encoding.F32LE)
    dec = PcmDecoder(Encoding.F32LE)
    out = np.concatenate([dec.feed(data[i:i + 3]) for i in range(0, len(data), 3)])
    np.testing.assert_array_equal(out, samples)
    with pytest.raises(AudioFormatError, match="NaN or infinite"):
        PcmDecoder(Encoding.F32LE).feed(struct.pack("<f", float("nan")))


def test_s16_encoding_clips_and_rounds():
    out = np.frombuffer(encode(np.array([2.0, -2.0, 0.5], dtype=np.float32), Encoding.S16LE), dtype="<i2")
    assert out.tolist() == [32767, -32767, 16384]


@pytest.mark.parametrize(("raw", "message"), [("7999", "must be between 8000 and 48000"), ("x", "is not an integer"),
                                          ("48001", "must be between 8000 and 48000")])
def test_parse_rate_errors(raw, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        parse_rate(raw)


def test_parse_encoding():
    assert parse_encoding("pcm_f32le") is Encoding.F32LE
    with pytest.raises(ValueError, match="^must be one of: pcm_s16le, pcm_f32le$"):
        parse_encoding("mp3")


@pytest.mark.parametrize(("in_rate", "out_rate"), [(24000, 16000), (16000, 48000), (44100, 16000), (8000, 24000)])
def test_streaming_resampler_equals_one_shot_and_has_the_right_length(in_rate, out_rate):
    x = tone(in_rate, in_rate)  # one second
    rs = StreamResampler(in_rate, out_rate)
    chunks = [rs.feed(x[i:i + 1920]) for i in range(0, len(x), 1920)] + [rs.flush()]
    streamed = np.concatenate(chunks)
    assert abs(len(streamed) - out_rate) <= 1
    whole = resample(x, in_rate, out_rate)
    n = min(len(whole), len(streamed))
    # the same filter, run in pieces: no discontinuity at chunk boundaries
    assert np.max(np.abs(streamed[:n] - whole[:n])) < 1e-3


def test_resampler_is_identity_at_equal_rates():
    x = tone(100)
    rs = StreamResampler(16000, 16000)
    np.testing.assert_array_equal(rs.feed(x), x)
    assert len(rs.flush()) == 0


def test_wav_roundtrip_through_the_stdlib_reader():
    x = tone(1600)
    data = write_wav(x, 16000)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (16000, 1, 2, 1600)
    y, rate = read_wav(data)
    assert rate == 16000 and np.max(np.abs(y - x)) < 1 / 32767 + 1e-6


def test_read_wav_float_stereo_and_streaming_header():
    x = tone(800, 24000)
    stereo = np.stack([x, x], axis=1).reshape(-1)
    header = bytearray(wav_header(24000, Encoding.F32LE))
    header[22:24] = struct.pack("<H", 2)  # two channels
    header[32:34] = struct.pack("<H", 8)
    y, rate = read_wav(bytes(header) + stereo.astype("<f4").tobytes())
    assert rate == 24000
    np.testing.assert_allclose(y, x, atol=1e-7)


@pytest.mark.parametrize(("data", "message"), [
    (b"hello", "not a WAV file (no RIFF/WAVE header)"),
    (b"RIFF\x04\x00\x00\x00WAVE", "WAV file has no fmt chunk"),
    (b"RIFF\x04\x00\x00\x00WAVEfmt \x10\x00\x00\x00" + struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16), "WAV file has no data chunk"),
    (wav_header(16000)[:20] + struct.pack("<HHIIHH", 2, 1, 16000, 32000, 2, 16) + b"data\x00\x00\x00\x00",
     "unsupported WAV encoding (format tag 2, 16 bits); use 16-bit PCM"),
])
def test_read_wav_errors_say_why(data, message):
    with pytest.raises(AudioFormatError) as err:
        read_wav(data)
    assert str(err.value) == message


@pytest.mark.parametrize("rate", [0, 1, 7999, 48001, 4_000_000_000])
def test_read_wav_refuses_a_rate_outside_8_to_48_khz(rate):
    data = wav_header(16000, n_samples=4)[:24] + struct.pack("<I", rate) + wav_header(16000, n_samples=4)[28:]
    with pytest.raises(AudioFormatError) as err:
        read_wav(data + b"\0" * 8)
    assert str(err.value) == f"the WAV file has a sample rate of {rate} Hz; accepted: 8000 to 48000 Hz"


def test_read_wav_refuses_audio_past_its_cap_before_decoding(monkeypatch):
    data = write_wav(np.zeros(8000 * 61, dtype=np.float32), 8000)  # 61 s
    decoded = []
    monkeypatch.setattr(np, "frombuffer", lambda *a, **k: decoded.append(a) or None)
    with pytest.raises(AudioTooLong) as err:
        read_wav(data, max_duration_s=60)
    assert (str(err.value), decoded) == ("audio of 1.0 min; the limit is 1 min", [])
