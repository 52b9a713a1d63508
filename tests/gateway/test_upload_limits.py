"""Upload routes count the bytes of the raw stream before the multipart parser:
a chunked upload with no Content-Length is refused once it passes the limit,
not spooled whole first."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from starlette.testclient import TestClient

from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import LOOPBACK, make_app
from tests.support.asgi import post_chunks
from tests.support.fake_sidecar import FakeSidecar

CHUNK = b"\0" * 65536
BOUNDARY = "vgboundary"


def multipart_upload(chunks: int, voice_id: str | None = None) -> Iterator[bytes]:
    """A multipart body whose WAV ``file`` part is ``chunks`` chunks of 64 KiB, made lazily."""
    head = ""
    if voice_id is not None:
        head += f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="id"\r\n\r\n{voice_id}\r\n'
    head += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
             "Content-Type: audio/wav\r\n\r\n")
    yield head.encode()
    for _ in range(chunks):
        yield CHUNK
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


HEADERS = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def _post(client: TestClient, path: str, body: Iterator[bytes]):
    call = functools.partial(post_chunks, client.app, path, body, state=client.app_state, headers=HEADERS,
                             client=LOOPBACK)
    return client.portal.call(call)


def test_a_chunked_transcription_upload_stops_at_the_limit(tmp_path) -> None:
    fake = FakeSidecar()
    with TestClient(make_app(tmp_path, asr=fake), client=LOOPBACK) as client:
        reply = _post(client, "/v1/audio/transcriptions", multipart_upload(1024))  # 64 MiB
    limit = 25 * 1024 * 1024 + 64 * 1024
    assert (reply.status, reply.json()) == (413, {"detail": f"request body is larger than {limit} bytes",
                                                  "code": "too_large"})
    # The limit is a whole number of chunks, so the part head plus that many chunks is the first read past it.
    assert reply.chunks_read == 1 + limit // len(CHUNK)
    assert fake.transcribe_calls == []


def test_a_chunked_voice_upload_stops_at_the_limit(tmp_path) -> None:
    app = make_app(tmp_path, tts={"pocket": FakeTtsEngine(can_clone=True)})
    with TestClient(app, client=LOOPBACK) as client:
        reply = _post(client, "/v1/voices", multipart_upload(1024, voice_id="mine"))
    limit = 10 * 1024 * 1024 + 64 * 1024
    assert (reply.status, reply.json()) == (413, {"detail": f"request body is larger than {limit} bytes",
                                                  "code": "too_large"})
    assert reply.chunks_read == 1 + limit // len(CHUNK)
