"""Live stream decoders: FFmpeg-made WebM and Ogg Opus streams cut anywhere,
raw Opus packets, G.711 and PCM; a packet comes out the moment its last byte
is in; bad input is named; PCM never loads FFmpeg."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gateway.audio import AudioFormatError
from gateway.codecs.decoders import stream_decoder
from gateway.codecs.formats import InputEncoding
from gateway.codecs.g711 import alaw_encode, mulaw_encode
from tests.support.media import ffmpeg_file, ffmpeg_video_only, opus_packets, tone

PRE_SKIP = 312  # libopus's lookahead at 48 kHz, written into OpusHead by FFmpeg


@pytest.fixture(scope="module")
def source() -> np.ndarray:
    return tone(1.0, 48000)


@pytest.fixture(scope="module")
def streams(source) -> dict[InputEncoding, bytes]:
    return {InputEncoding.WEBM: ffmpeg_file("webm", "libopus", source, 48000),
            InputEncoding.OGG: ffmpeg_file("ogg", "libopus", source, 48000)}


def decode_all(encoding: InputEncoding, data: bytes, chunk: int) -> np.ndarray:
    decoder = stream_decoder(encoding, 16000)
    parts = [decoder.feed(data[i:i + chunk]) for i in range(0, len(data), chunk)]
    return np.concatenate([*parts, decoder.finish()])


def aligned_snr_db(reference: np.ndarray, decoded: np.ndarray) -> float:
    n = min(len(reference), len(decoded))
    ref, out = reference[:n], decoded[:n]
    return float(10 * np.log10(np.sum(ref ** 2) / np.sum((ref - out) ** 2)))


@pytest.mark.parametrize("encoding", [InputEncoding.WEBM, InputEncoding.OGG])
@pytest.mark.parametrize("chunk", [1, 13, 500, 1 << 20])
def test_container_streams_decode_the_same_in_any_chunking(streams, source, encoding, chunk):
    decoded = decode_all(encoding, streams[encoding], chunk)
    assert stream_decoder(encoding, 16000).sample_rate == 48000
    assert len(decoded) == 51 * 960 - PRE_SKIP  # every packet, the encoder's lookahead dropped
    assert np.array_equal(decoded, decode_all(encoding, streams[encoding], len(streams[encoding])))
    assert aligned_snr_db(source, decoded) > 15  # the tone itself, in time (pre-skip applied)


@pytest.mark.parametrize("encoding", [InputEncoding.WEBM, InputEncoding.OGG])
def test_each_packet_comes_out_when_its_last_byte_arrives(streams, encoding):
    """Fed one byte at a time, the decoder releases audio 51 times, one packet
    each: it never holds a packet back waiting for more of the stream."""
    decoder = stream_decoder(encoding, 16000)
    data = streams[encoding]
    released = [n for n in (len(decoder.feed(data[i:i + 1])) for i in range(len(data))) if n]
    if encoding is InputEncoding.WEBM:
        assert released == [960 - PRE_SKIP] + [960] * 50
    else:  # an Ogg page ends with its last packet: FFmpeg puts several packets in a page
        assert sum(released) == 51 * 960 - PRE_SKIP
        assert all(n % 960 == 960 - PRE_SKIP or n % 960 == 0 for n in released)


def test_stereo_webm_is_mixed_to_mono(source):
    data = ffmpeg_file("webm", "libopus", source, 48000, channels=2)
    decoded = decode_all(InputEncoding.WEBM, data, 100)
    assert len(decoded) == 51 * 960 - PRE_SKIP and decoded.ndim == 1
    assert aligned_snr_db(source, decoded) > 15


def test_raw_opus_packets_one_per_message():
    source = tone(1.0, 16000)
    packets = opus_packets(source, 16000)
    decoder = stream_decoder(InputEncoding.OPUS, 16000)
    out = [decoder.feed(p) for p in packets]
    assert decoder.sample_rate == 48000
    assert [len(o) for o in out] == [960] * len(packets)  # no header, nothing skipped: 20 ms each


def test_a_bad_opus_packet_is_named_and_the_next_one_decodes():
    packets = opus_packets(tone(0.2, 16000), 16000)
    decoder = stream_decoder(InputEncoding.OPUS, 16000)
    decoder.feed(packets[0])
    with pytest.raises(AudioFormatError, match=r"^an Opus packet does not decode: "):
        decoder.feed(b"\xff\xff\xff")  # a code-3 packet declaring more frames than it has
    assert len(decoder.feed(packets[1])) == 960


def test_an_oversized_opus_packet_is_refused_unread():
    decoder = stream_decoder(InputEncoding.OPUS, 16000)
    with pytest.raises(AudioFormatError, match=r"^an Opus packet of 10000 bytes; the largest valid one is 7650$"):
        decoder.feed(b"\0" * 10000)


@pytest.mark.parametrize(("encoding", "message"), [
    (InputEncoding.WEBM, r"^not a WebM stream \(no EBML header at its start\)$"),
    (InputEncoding.OGG, r"^not an Ogg stream at byte 0 \(no 'OggS' page\)$"),
])
def test_garbage_bytes_are_named(encoding, message):
    decoder = stream_decoder(encoding, 16000)
    with pytest.raises(AudioFormatError, match=message):
        decoder.feed(np.random.default_rng(1).bytes(4000))


def test_a_video_only_webm_has_no_audio_track():
    with pytest.raises(AudioFormatError, match=r"^the stream has no audio track \(found: video V_MPEG4/ISO/ASP\)$"):
        decode_all(InputEncoding.WEBM, ffmpeg_video_only("matroska"), 64)


def test_ogg_without_opus_names_what_it_holds():
    data = ffmpeg_file("ogg", "flac", tone(0.5, 16000), 16000)
    with pytest.raises(AudioFormatError, match=r"^the Ogg stream has no Opus audio \(found: FLAC\)$"):
        decode_all(InputEncoding.OGG, data, 1000)


def test_webm_with_another_audio_codec_asks_for_opus():
    data = ffmpeg_file("matroska", "flac", tone(0.5, 16000), 16000)
    with pytest.raises(AudioFormatError, match=r"^the WebM audio track is A_FLAC; send Opus \(A_OPUS\)$"):
        decode_all(InputEncoding.WEBM, data, 1000)


@pytest.mark.parametrize("encoding", [InputEncoding.WEBM, InputEncoding.OGG])
def test_a_truncated_stream_is_reported_at_its_end(streams, encoding):
    data = streams[encoding]
    decoder = stream_decoder(encoding, 16000)
    decoder.feed(data[:len(data) // 2])
    kind = "a page" if encoding is InputEncoding.OGG else "an element"
    with pytest.raises(AudioFormatError, match=rf"ended inside {kind} \(\d+ bytes of it were dropped\)$"):
        decoder.finish()


def test_g711_and_pcm_decode_at_the_clients_rate():
    x = tone(0.1, 8000)
    for encoding, data in ((InputEncoding.MULAW, mulaw_encode(x)), (InputEncoding.ALAW, alaw_encode(x))):
        decoder = stream_decoder(encoding, 8000)
        assert decoder.sample_rate == 8000
        assert len(decoder.feed(data[:333])) + len(decoder.feed(data[333:])) == 800
    pcm = stream_decoder(InputEncoding.PCM_S16LE, 16000)
    assert len(pcm.feed(b"\0\0\0")) == 1 and len(pcm.feed(b"\0")) == 1


def test_pcm_and_g711_paths_never_import_ffmpeg():
    code = ("import sys\n"
            "import numpy as np\n"
            "from gateway.codecs.decoders import stream_decoder\n"
            "from gateway.codecs.encoders import audio_encoder\n"
            "from gateway.codecs.formats import InputEncoding, OutputFormat\n"
            "for e in ('pcm_s16le', 'pcm_f32le', 'mulaw', 'alaw'):\n"
            "    stream_decoder(InputEncoding(e), 8000).feed(bytes(64))\n"
            "for f in ('pcm_s16le', 'pcm_f32le', 'wav', 'mulaw', 'alaw'):\n"
            "    enc = audio_encoder(OutputFormat(f), 8000); enc.start(); enc.encode(np.zeros(80, np.float32))\n"
            "print('av' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout == "False\n"
