"""Whole-file decoding for transcription: every accepted container from
FFmpeg's muxers; headers that lie about the rate or the length; files that are
not audio, are cut short or are garbage; pictures beside the audio, tags that
are not UTF-8 and codecs that are unknown or not accepted."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from gateway.audio import AudioFormatError, AudioTooLong, write_wav
from gateway.codecs.files import decode_file, sniff
from tests.support.file_bombs import (
    decode_in_capped_child,
    honest_pcm_m4a,
    mp3_with_binary_tag,
    png_track_bomb,
    webm_unknown_codec,
)
from tests.support.media import ffmpeg_file, ffmpeg_video_only, tone

CAP_S = 60.0


def made(kind: str, seconds: float = 2.0) -> bytes:
    if kind == "wav":
        return write_wav(tone(seconds, 22050), 22050)
    container, codec, rate, channels = {
        "flac": ("flac", "flac", 44100, 2), "mp3": ("mp3", "libmp3lame", 24000, 1),
        "ogg-opus": ("ogg", "libopus", 48000, 2), "ogg-flac": ("ogg", "flac", 16000, 1),
        "webm": ("webm", "libopus", 48000, 1), "m4a": ("ipod", "aac", 44100, 2), "aac": ("adts", "aac", 24000, 1),
        "mp4": ("mp4", "aac", 16000, 1)}[kind]
    return ffmpeg_file(container, codec, tone(seconds, rate), rate, channels=channels)


@pytest.mark.parametrize(("kind", "container", "codec", "rate", "slack_s"), [
    ("wav", "wav", "pcm", 22050, 0.0),
    ("flac", "flac", "flac", 44100, 0.0),
    ("mp3", "mp3", "mp3float", 24000, 0.0),  # FFmpeg's muxer writes the LAME gapless header
    ("ogg-opus", "ogg", "opus", 48000, 0.0),
    ("ogg-flac", "ogg", "flac", 16000, 0.0),
    ("webm", "matroska", "opus", 48000, 0.0),
    ("m4a", "mov", "aac", 44100, 0.03),  # FFmpeg's AAC priming is signalled; the last frame's padding is not
    ("mp4", "mov", "aac", 16000, 0.07),
    ("aac", "aac", "aac", 24000, 0.09),  # ADTS cannot signal priming at all
])
def test_every_accepted_file_decodes_to_16khz_of_its_duration(kind, container, codec, rate, slack_s):
    decoded = decode_file(made(kind), 16000, CAP_S)
    assert (decoded.container, decoded.codec, decoded.source_rate) == (container, codec, rate)
    assert decoded.samples.dtype == np.float32
    assert 2.0 - 0.001 <= len(decoded.samples) / 16000 <= 2.0 + slack_s + 0.001
    assert np.sqrt(np.mean(decoded.samples[1600:-1600] ** 2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.1)


def test_magic_bytes_pick_the_demuxer():
    assert [sniff(made(k, 0.1)) for k in ("wav", "flac", "mp3", "ogg-opus", "webm", "m4a", "aac")] == \
        ["wav", "flac", "mp3", "ogg", "matroska", "mov", "aac"]
    assert sniff(b"#EXTM3U\nhttp://example/a.ts") is None  # playlists never reach FFmpeg


def test_garbage_is_not_an_audio_file():
    with pytest.raises(AudioFormatError, match=r"^not a recognised audio file \(accepted: WAV, FLAC, MP3, Ogg "
                                               r"\(Opus, Vorbis, FLAC\), WebM, M4A/MP4 or AAC\)$"):
        decode_file(np.random.default_rng(0).bytes(5000), 16000, CAP_S)


@pytest.mark.parametrize("container", ["matroska", "mp4"])
def test_a_video_only_file_says_what_it_holds(container):
    with pytest.raises(AudioFormatError, match=r"^the file has no audio stream \(found: video mpeg4\)$"):
        decode_file(ffmpeg_video_only(container), 16000, CAP_S)


def test_a_wav_header_claiming_1_hz_is_refused_before_resampling():
    data = bytearray(write_wav(np.zeros(4000, np.float32), 16000))
    struct.pack_into("<II", data, 24, 1, 2)  # sample rate 1, byte rate 2
    with pytest.raises(AudioFormatError, match=r"^the WAV file has a sample rate of 1 Hz; accepted: 8000 to 48000 Hz$"):
        decode_file(bytes(data), 16000, CAP_S)


def flac_with_streaminfo(rate: int | None = None, total: int | None = None, seconds: float = 2.0) -> bytes:
    data = bytearray(made("flac", seconds))
    word = int.from_bytes(data[18:26], "big")  # rate:20 channels-1:3 bits-1:5 total:36
    if rate is not None:
        word = (word & ((1 << 44) - 1)) | (rate << 44)
    if total is not None:
        word = (word & ~((1 << 36) - 1)) | total
    data[18:26] = word.to_bytes(8, "big")
    return bytes(data)


def test_a_flac_header_claiming_1_hz_sizes_nothing():
    """FFmpeg takes the rate from the first frame (44.1 kHz) and the time base
    from STREAMINFO (1 Hz): 88200 samples then claim 24.5 hours, refused
    unread; with no length claimed, the frames decode at their real rate."""
    with pytest.raises(AudioTooLong, match=r"^audio of 1470\.0 min; the limit is 1 min$"):
        decode_file(flac_with_streaminfo(rate=1), 16000, CAP_S)
    decoded = decode_file(flac_with_streaminfo(rate=1, total=0), 16000, CAP_S)
    assert (decoded.source_rate, len(decoded.samples)) == (44100, 32000)


def test_a_declared_length_over_the_cap_is_refused_before_decoding():
    with pytest.raises(AudioTooLong, match=r"^audio of 1\.5 min; the limit is 1 min$"):
        decode_file(made("mp3", 90.0), 16000, CAP_S)
    with pytest.raises(AudioTooLong, match=r"^audio of 1\.5 min; the limit is 1 min$"):
        decode_file(write_wav(np.zeros(90 * 8000, np.float32), 8000), 16000, CAP_S)


def test_a_header_that_understates_the_length_is_caught_at_the_cap():
    lying = flac_with_streaminfo(total=44100, seconds=90.0)  # says 1 s, holds 90 s
    with pytest.raises(AudioTooLong, match=r"^audio of 1\.0 min; the limit is 1 min$"):
        decode_file(lying, 16000, CAP_S)


@pytest.mark.parametrize(("kind", "message"), [
    ("flac", r"^the FLAC file is corrupt or truncated: "),
    ("m4a", r"^the file cannot be read as MP4/M4A: "),  # the index (moov) is at the end
    ("aac", r"^the AAC file is corrupt or truncated: "),
])
def test_a_truncated_file_that_ffmpeg_notices_is_refused_with_the_reason(kind, message):
    data = made(kind)
    with pytest.raises(AudioFormatError, match=message):
        decode_file(data[:len(data) // 2], 16000, CAP_S)


@pytest.mark.parametrize("kind", ["mp3", "ogg-opus", "webm", "wav"])
def test_a_truncated_stream_format_gives_what_it_holds(kind):
    """Formats made to be streamed have no length to contradict: the first half plays."""
    data = made(kind)
    decoded = decode_file(data[:len(data) // 2], 16000, CAP_S)
    assert 0.8 <= len(decoded.samples) / 16000 <= 1.1


def test_a_header_alone_holds_no_audio():
    with pytest.raises(AudioFormatError, match=r"^the file cannot be read as Ogg: "):
        decode_file(made("ogg-opus")[:100], 16000, CAP_S)


def test_a_picture_track_is_never_decoded():
    """FFmpeg's stream probing opens audio decoders only: the 16000x16000 PNG
    beside the audio is not decoded (its decode grew the process by 743 MB)."""
    outcome, grown_mb = decode_in_capped_child("png_track_bomb")
    assert grown_mb < 100, f"the decode grew by {grown_mb} MB ({outcome})"
    assert outcome == "decoded"


def test_the_audio_beside_a_picture_track_decodes():
    decoded = decode_file(png_track_bomb(), 16000, CAP_S)
    assert (decoded.container, decoded.codec, len(decoded.samples)) == ("mov", "aac", 32768)


def test_a_tag_that_is_not_utf8_is_read_without_its_bad_bytes():
    decoded = decode_file(mp3_with_binary_tag(1.0), 16000, CAP_S)
    assert (decoded.codec, len(decoded.samples)) == ("mp3float", 16000)


def test_a_codec_no_decoder_knows_is_named():
    with pytest.raises(AudioFormatError) as info:
        decode_file(webm_unknown_codec(), 16000, CAP_S)
    assert str(info.value) == ("the WebM/Matroska audio stream's codec A_FOOB has no decoder here (accepted: AAC, "
                               "ALAC, FLAC, MP3, Opus, Vorbis or PCM)")


def test_a_codec_outside_the_accepted_ones_is_refused_before_decoding():
    ac3 = ffmpeg_file("matroska", "ac3", tone(1.0, 48000), 48000)
    with pytest.raises(AudioFormatError) as info:
        decode_file(ac3, 16000, CAP_S)
    assert str(info.value) == ("the WebM/Matroska audio stream's codec ac3 is not accepted (accepted: AAC, ALAC, "
                               "FLAC, MP3, Opus, Vorbis or PCM)")


@pytest.mark.parametrize(("data", "codec", "rate"), [
    (ffmpeg_file("ipod", "alac", tone(1.0, 44100), 44100), "alac", 44100),
    (honest_pcm_m4a(1.0, 16000), "pcm_s16be", 16000),
])
def test_lossless_and_pcm_tracks_in_mp4_decode(data, codec, rate):
    decoded = decode_file(data, 16000, CAP_S)
    assert (decoded.codec, decoded.source_rate, len(decoded.samples)) == (codec, rate, 16000)
