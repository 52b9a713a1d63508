"""Reading request bodies with a bound: the one reader every route that reads a body uses.

A body is refused as soon as it is known to be larger than the route's limit:
from ``Content-Length`` before anything is read, or by counting while it
arrives (a chunked upload has no length), so a huge body is never held whole,
in memory or spooled to disk.

It lives in auth/ because the credential exchange (auth/routes.py) reads bodies
too and auth must not import gateway, while gateway may import auth: the
gateway's JSON reader (gateway/protocol/json.py) and its upload routes wrap
these functions in their own error types.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]


class BodyTooLarge(Exception):
    """The body is over the limit; the message says by how much, and is safe to show."""


class BodyInvalid(Exception):
    """The body is not a JSON object; the message says why, and is safe to show."""


def check_declared_length(request: Request, max_bytes: int) -> None:
    """``BodyTooLarge`` when ``Content-Length`` already says the body is over ``max_bytes``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"request body of {int(declared)} bytes; the limit is {max_bytes}")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The whole body, refused with ``BodyTooLarge`` the moment it passes ``max_bytes``."""
    check_declared_length(request, max_bytes)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise BodyTooLarge(f"request body is larger than {max_bytes} bytes")
    return bytes(body)


def bounded_request(request: Request, max_bytes: int) -> Request:
    """``request`` whose raw body stream raises ``BodyTooLarge`` past ``max_bytes``.

    For parsers that read the stream themselves (multipart forms): the bytes are
    counted as they arrive, before the parser sees them, so nothing past the
    limit is ever parsed, buffered or spooled.
    """
    check_declared_length(request, max_bytes)
    return Request(request.scope, limit_receive(request.receive, max_bytes))


def limit_receive(receive: Receive, max_bytes: int) -> Receive:
    """An ASGI ``receive`` that counts body bytes and raises ``BodyTooLarge`` past ``max_bytes``."""
    seen = 0

    async def limited() -> Message:
        nonlocal seen
        message = await receive()
        if message.get("type") == "http.request":
            seen += len(message.get("body", b""))
            if seen > max_bytes:
                raise BodyTooLarge(f"request body is larger than {max_bytes} bytes")
        return message

    return limited


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object (an empty body is ``{}``); ``BodyInvalid`` saying why not."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except RecursionError:
        raise BodyInvalid("body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise BodyInvalid("body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BodyInvalid("body must be a JSON object")
    return data
