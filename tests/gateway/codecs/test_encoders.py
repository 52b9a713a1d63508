"""Streaming encoders: every format decodes, with a decoder other than the
encoder's wherever one exists, to audio of the right rate and duration; Ogg
Opus comes out as whole pages, one per call, each prefix playable."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.codecs.encoders import audio_encoder
from gateway.codecs.formats import HTTP_OUTPUTS, OutputFormat
from gateway.codecs.ogg import OggReader
from tests.support.media import ffmpeg_decode, libsndfile_decode, libsndfile_raw, sox_decode_flac, tone

CHUNK_S = 0.08  # a Pocket TTS frame
# Encoder priming a headerless stream cannot announce: LAME's delay plus its last
# frame's padding; AAC's 1024 priming samples plus its last frame's padding. Opus
# (granule positions) and FLAC give back the exact length.
SLACK_S = {OutputFormat.MP3: 0.08, OutputFormat.AAC: 2048 / 24000}


def encode_stream(fmt: OutputFormat, rate: int, samples: np.ndarray) -> tuple[bytes, list[bytes]]:
    encoder = audio_encoder(fmt, rate)
    step = int(rate * CHUNK_S)
    pieces = [encoder.start()] + [encoder.encode(samples[i:i + step]).data for i in range(0, len(samples), step)]
    pieces.append(encoder.finish().data)
    return b"".join(pieces), pieces


def independent_decode(fmt: OutputFormat, data: bytes, rate: int) -> tuple[np.ndarray, int]:
    raw = {OutputFormat.PCM_S16LE: "PCM_16", OutputFormat.PCM_F32LE: "FLOAT", OutputFormat.MULAW: "ULAW",
           OutputFormat.ALAW: "ALAW"}
    if fmt in raw:
        return libsndfile_raw(data, raw[fmt], rate), rate
    if fmt is OutputFormat.FLAC:
        return sox_decode_flac(data)
    if fmt is OutputFormat.AAC:
        return ffmpeg_decode(data, "aac")  # no other AAC decoder on this machine
    return libsndfile_decode(data)  # WAV, MP3 (mpg123), Ogg Opus (libopus + libsndfile's Ogg)


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


@pytest.mark.parametrize("fmt", HTTP_OUTPUTS)
def test_every_format_decodes_elsewhere_to_the_right_rate_duration_and_sound(fmt):
    rate = fmt.default_rate(24000)
    source = tone(1.5, rate, freq=440.0)
    data, _ = encode_stream(fmt, rate, source)
    decoded, got_rate = independent_decode(fmt, data, rate)
    assert got_rate == rate
    extra = len(decoded) / rate - 1.5
    assert 0 <= extra <= SLACK_S.get(fmt, 0.0)
    assert dominant_hz(decoded, rate) == pytest.approx(440, abs=2)
    assert np.sqrt(np.mean(decoded ** 2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.15)


def test_g711_defaults_to_telephony_rate_and_others_keep_the_engine_rate():
    assert [fmt.default_rate(24000) for fmt in HTTP_OUTPUTS] == [24000, 24000, 24000, 24000, 24000, 24000, 24000,
                                                                 8000, 8000]
    assert OutputFormat.OPUS.default_rate(22050) == 24000
    assert OutputFormat.MP3.default_rate(22050) == 22050


@pytest.mark.parametrize(("fmt", "rate", "message"), [
    (OutputFormat.OPUS, 22050, "must be one of 8000, 12000, 16000, 24000, 48000 for opus"),
    (OutputFormat.MP3, 20000, "must be one of 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000 for mp3"),
    (OutputFormat.AAC, 9000, "must be one of 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000 for aac"),
])
def test_rates_a_codec_cannot_carry_are_refused(fmt, rate, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        audio_encoder(fmt, rate)


def test_flac_is_lossless_at_16_bits():
    source = tone(1.0, 24000)
    data, _ = encode_stream(OutputFormat.FLAC, 24000, source)
    decoded, _ = sox_decode_flac(data)
    assert np.abs(decoded - np.round(source * 32767) / 32768).max() < 1e-4


def test_ogg_opus_is_one_page_of_four_20ms_packets_per_80ms_frame_and_every_prefix_plays():
    source = tone(1.04, 24000)  # 13 frames of 80 ms
    _, pieces = encode_stream(OutputFormat.OPUS, 24000, source)
    header, frames, tail = pieces[0], pieces[1:-1], pieces[-1]
    reader = OggReader()
    assert [p.data[:8] for p in reader.feed(header)] == [b"OpusHead", b"OpusTags"]
    for frame in frames:
        packets = list(reader.feed(frame))
        assert len(packets) == 4 and frame.count(b"OggS") == 1  # one page, 4 x 20 ms
    assert tail.count(b"OggS") == 1 and tail[5] == 0x04  # the end-of-stream page
    for count in (1, 5, len(frames)):
        prefix = header + b"".join(frames[:count])
        decoded, rate = libsndfile_decode(prefix)
        assert rate == 24000
        assert len(decoded) == pytest.approx(count * 1920, abs=160)  # less the pre-skip, 6.5 ms


def test_mp3_and_aac_bytes_flow_before_the_stream_ends():
    for fmt in (OutputFormat.MP3, OutputFormat.AAC):
        _, pieces = encode_stream(fmt, 24000, tone(1.0, 24000))
        assert all(pieces[2:-1]), fmt  # after the codec's first-frame delay every 80 ms chunk yields bytes
