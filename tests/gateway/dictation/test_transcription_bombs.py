"""POST /v1/audio/transcriptions with hostile files, over HTTP to the real app:
each gets its exact answer (400 ``bad_audio`` naming the limit or the codec,
or 200 with only its audio used), the gateway's own memory stays flat (it runs
under an address-space cap here, as a victim would need) and nothing is logged
with a traceback."""

from __future__ import annotations

import logging
import os
import resource

import numpy as np
import pytest

from gateway.audio import write_wav
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.file_bombs import (
    address_space_cap,
    mp3_with_binary_tag,
    png_track_bomb,
    sample_table_bomb,
    webm_unknown_codec,
)

GATEWAY_GROWTH_BOUND_MB = 150


def post(client, name: str, data: bytes):
    return client.post("/v1/audio/transcriptions", files={"file": (name, data, "application/octet-stream")})


def no_traceback(caplog: pytest.LogCaptureFixture) -> bool:
    return not any(r.exc_info or "Traceback" in r.getMessage() for r in caplog.records)


REFUSED = [
    ("bomb.m4a", sample_table_bomb, ("file: track 1 (sound) of the MP4 file declares 68719476736 samples; at most "
                                    "43200000 fit in the 15 min limit (48000 a second)")),
    ("foob.webm", webm_unknown_codec, ("file: the WebM/Matroska audio stream's codec A_FOOB has no decoder here "
                                      "(accepted: AAC, ALAC, FLAC, MP3, Opus, Vorbis or PCM)")),
]


def post_capped(tmp_path, fake, name: str, data: bytes):
    """POST ``data`` with this process under an address-space cap; the response,
    once the gateway's growth while it was decoded is checked."""
    with dictation_client(tmp_path, fake) as client, address_space_cap(1 << 30):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = post(client, name, data)
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    assert grown_mb < GATEWAY_GROWTH_BOUND_MB, f"the gateway grew by {grown_mb} MB"
    return r


@pytest.mark.parametrize(("name", "build", "detail"), REFUSED, ids=["sample-table-bomb", "unknown-codec"])
def test_a_hostile_file_is_400_bad_audio_naming_why(tmp_path, caplog, name, build, detail):
    caplog.set_level(logging.DEBUG)
    fake = FakeSidecar(transcription={"text": "x"})
    r = post_capped(tmp_path, fake, name, build())
    assert (r.status_code, r.json()) == (400, {"detail": detail, "code": "bad_audio"})
    assert fake.transcribe_calls == []
    assert no_traceback(caplog)


@pytest.mark.parametrize(("name", "build", "samples"), [
    ("picture.mov", png_track_bomb, 32768),  # the 16000x16000 PNG track is never decoded
    ("tagged.mp3", mp3_with_binary_tag, 16000),  # the title that is not UTF-8 is read without its bad bytes
], ids=["png-track", "binary-id3-tag"])
def test_a_file_with_hostile_extras_is_transcribed_from_its_audio(tmp_path, caplog, name, build, samples):
    caplog.set_level(logging.DEBUG)
    fake = FakeSidecar(transcription={"text": "x"})
    r = post_capped(tmp_path, fake, name, build())
    assert (r.status_code, r.json()) == (200, {"text": "x"})
    assert fake.transcribe_calls == [{"samples": samples, "language": None, "word_timestamps": False}]
    assert no_traceback(caplog)


def test_a_file_past_the_decoders_memory_is_400_naming_the_setting_value(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    seconds = 14 * 60  # 8 kHz 8-bit: 6.7 MB that decode to 54 MB of float32 at 16 kHz
    wav = bytearray(write_wav(np.zeros(0, dtype=np.float32), 8000))
    wav[32:36] = (1).to_bytes(2, "little") + (8).to_bytes(2, "little")
    wav[28:32] = (8000).to_bytes(4, "little")
    wav[40:44] = (seconds * 8000).to_bytes(4, "little")
    with dictation_client(tmp_path, FakeSidecar(transcription={"text": "x"}), decode_memory_mb=64) as client:
        r = post(client, "long.wav", bytes(wav) + b"\x80" * (seconds * 8000))
    assert (r.status_code, r.json()) == (400, {
        "detail": "file: decoding it needs more than the 64 MB of memory a file may use", "code": "bad_audio"})
    assert no_traceback(caplog)


def test_the_decoders_live_and_end_with_the_app(tmp_path):
    with dictation_client(tmp_path, FakeSidecar(transcription={"text": "x"})) as client:
        decoders = client.app_state["decoders"]
        assert decoders.pids == []  # started by the first upload, not before
        assert post(client, "a.wav", write_wav(np.zeros(8000, dtype=np.float32), 8000)).status_code == 200
        pids = decoders.pids
        assert len(pids) == 1 and pids[0] != os.getpid()
    assert decoders.pids == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
