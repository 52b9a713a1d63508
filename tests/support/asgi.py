"""Driving an ASGI app with a body that arrives in chunks, counting what it reads.

TestClient reads a request body whole before the app sees any of it, so it
cannot show whether a route stops reading at its limit. ``post_chunks`` plays
the server's part instead: it hands the app one chunk per ``receive`` call and
reports how many chunks the app asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChunkedReply:
    status: int
    headers: dict[str, str]
    body: bytes
    chunks_read: int  # how many body chunks the app pulled before answering
    extra: list[MutableMapping[str, Any]] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


async def post_chunks(app: Any, path: str, chunks: Iterable[bytes], *, state: Mapping[str, Any],
                      headers: Mapping[str, str] | None = None, client: tuple[str, int] = ("127.0.0.1", 50000),
                      host: str = "127.0.0.1:8000") -> ChunkedReply:
    """POST ``chunks`` to ``path`` of ``app`` (a chunked upload unless headers say otherwise)."""
    iterator = iter(chunks)
    read = 0
    finished = False
    raw_headers = [(b"host", host.encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    if not any(k == b"content-length" for k, _ in raw_headers):
        raw_headers.append((b"transfer-encoding", b"chunked"))
    path_part, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path_part, "raw_path": path_part.encode(), "query_string": query.encode(),
             "root_path": "", "headers": raw_headers, "client": client, "server": ("127.0.0.1", 8000),
             "state": dict(state)}
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal read, finished
        if finished:
            return {"type": "http.disconnect"}
        try:
            chunk = next(iterator)
        except StopIteration:
            finished = True
            return {"type": "http.request", "body": b"", "more_body": False}
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    reply_headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", [])}
    return ChunkedReply(start["status"], reply_headers, body, read, sent)


def repeat(chunk: bytes, times: int) -> Iterable[bytes]:
    """``chunk`` ``times`` times, made lazily (a large body costs no memory)."""
    for _ in range(times):
        yield chunk
