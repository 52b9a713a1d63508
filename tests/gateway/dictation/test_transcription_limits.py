"""File transcriptions are bounded apart from live streams: past
``max_transcriptions`` running at once a request gets 503 + Retry-After, and
dictation sockets still open."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from engines.asr.framing import MAX_PAYLOAD_BYTES
from gateway.audio import write_wav
from gateway.dictation.sidecar import AsrSupervisor
from gateway.errors import TooLarge
from tests.gateway.helpers import LOOPBACK, make_app
from tests.support.asgi import post_chunks
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import receive

BOUNDARY = "vgboundary"
HEADERS = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
WAV = write_wav(np.zeros(8000, dtype=np.float32), 8000)
BODY = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n").encode() + WAV + f"\r\n--{BOUNDARY}--\r\n".encode()


class HeldSidecar(FakeSidecar):
    """Transcriptions report that they started, then wait until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(transcription={"text": "done"})
        self.release: asyncio.Event | None = None
        self.started: asyncio.Queue[None] | None = None

    async def transcribe(self, samples: np.ndarray, **kw: Any) -> dict[str, Any]:
        assert self.release is not None and self.started is not None
        self.started.put_nowait(None)
        await self.release.wait()
        return await super().transcribe(samples, **kw)


async def _one_more_than(held: int, app: Any, state: Any, fake: HeldSidecar) -> tuple[Any, list[Any]]:
    """Start ``held`` transcriptions, wait until all run, post one more; its reply and theirs."""
    fake.release, fake.started = asyncio.Event(), asyncio.Queue()
    post = functools.partial(post_chunks, app, "/v1/audio/transcriptions", state=state, headers=HEADERS,
                             client=LOOPBACK)
    first = [asyncio.create_task(post([BODY])) for _ in range(held)]
    for _ in range(held):
        await fake.started.get()
    extra = await post([BODY])
    fake.release.set()
    return extra, list(await asyncio.gather(*first))


def test_a_third_concurrent_transcription_is_503_with_retry_after(tmp_path) -> None:
    fake = HeldSidecar()
    with TestClient(make_app(tmp_path, asr=fake), client=LOOPBACK) as client:
        third, first = client.portal.call(_one_more_than, 2, client.app, client.app_state, fake)
        with client.websocket_connect("/v1/dictation") as ws:  # live streams are counted apart
            assert receive(ws)["type"] == "ready"
        assert client.get("/v1/admin/sessions").json() == {"sessions": []}
    assert (third.status, third.headers["retry-after"], third.json()) == (
        503, "5", {"detail": "too many file transcriptions (limit 2); try again later", "code": "over_capacity"})
    assert [(r.status, r.json()) for r in first] == [(200, {"text": "done"})] * 2


def test_the_limit_is_a_setting(tmp_path) -> None:
    fake = HeldSidecar()
    with TestClient(make_app(tmp_path, asr=fake, max_transcriptions=1), client=LOOPBACK) as client:
        second, first = client.portal.call(_one_more_than, 1, client.app, client.app_state, fake)
    assert (second.status, second.json()["detail"]) == (503, "too many file transcriptions (limit 1); try again later")
    assert [r.status for r in first] == [200]


def _upload(client: TestClient, wav: bytes):
    return client.post("/v1/audio/transcriptions", files={"file": ("a.wav", wav, "audio/wav")})


def test_a_wav_declaring_1_hz_is_refused_before_any_resampling(tmp_path) -> None:
    fake = FakeSidecar(transcription={"text": "x"})
    one_hz = bytearray(write_wav(np.zeros(4400, dtype=np.float32), 16000))  # 8.8 KB of samples
    one_hz[24:28] = (1).to_bytes(4, "little")
    with TestClient(make_app(tmp_path, asr=fake), client=LOOPBACK) as client:
        r = _upload(client, bytes(one_hz))
    assert (r.status_code, r.json()) == (400, {
        "detail": "file: the WAV file has a sample rate of 1 Hz; accepted: 8000 to 48000 Hz", "code": "bad_audio"})
    assert fake.transcribe_calls == []


def test_audio_past_15_minutes_is_413_and_never_reaches_the_sidecar(tmp_path) -> None:
    fake = FakeSidecar(transcription={"text": "x"})
    header = bytearray(write_wav(np.zeros(0, dtype=np.float32), 8000))
    header[34:36] = (8).to_bytes(2, "little")  # 8-bit PCM: 16 minutes in 7.7 MB
    header[32:34] = (1).to_bytes(2, "little")
    header[28:32] = (8000).to_bytes(4, "little")
    samples = 16 * 60 * 8000
    header[40:44] = samples.to_bytes(4, "little")
    with TestClient(make_app(tmp_path, asr=fake), client=LOOPBACK) as client:
        r = _upload(client, bytes(header) + b"\x80" * samples)
    assert (r.status_code, r.json()) == (413, {"detail": "file: audio of 16.0 min; the limit is 15 min",
                                               "code": "too_large"})
    assert fake.transcribe_calls == []


async def test_the_supervisor_refuses_audio_one_frame_cannot_carry(tmp_path) -> None:
    supervisor = AsrSupervisor(model="tiny.en", data_dir=tmp_path)  # never started: the size is checked first
    with pytest.raises(TooLarge) as info:
        await supervisor.transcribe(np.zeros(MAX_PAYLOAD_BYTES // 4 + 1, dtype=np.float32), language=None,
                                    word_timestamps=False, timeout_s=1.0)
    assert info.value.message == "17.5 min of audio is more than one transcription takes (17.5 min)"
