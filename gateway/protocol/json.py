"""The one JSON-object reader: socket messages and HTTP bodies alike.

Every JSON the gateway accepts from a client is an object. Parsing failures
become the caller's error class (``BadMessage`` on a socket, where the session
goes on; ``BadRequest`` for an HTTP body) with a message that says what is
wrong, including JSON nested too deep for the parser.

What a message costs to parse grows with its size and with the values it
holds, which a client chooses. So every socket measures a message before
parsing it (``utf8_size``) against a small cap, ``MAX_EVENT_BYTES``, for JSON
that is not audio; only a front's audio append may be larger, and such a
message must first show it is one flat object (``structure_count``), so
parsing it builds a handful of values, never millions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from auth import body
from gateway.errors import BadMessage, BadRequest, TooLarge

MAX_EVENT_BYTES = 64 * 1024  # a JSON socket message that carries no audio
STRUCTURAL_CHARACTERS = "{[:,"
T = TypeVar("T")


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes on the wire (UTF-8), without encoding an ASCII text."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def structure_count(text: str) -> int:
    """How many of JSON's structural characters ``text`` holds, strings included: a
    bound on the objects, arrays and members a parser would build, counted in C
    without parsing anything."""
    return sum(text.count(c) for c in STRUCTURAL_CHARACTERS)


def parse_message(raw: str | bytes) -> dict[str, Any]:
    """A socket message as a JSON object; ``BadMessage`` saying why it is not one."""
    return json_object(raw, BadMessage, "message is", "message must be a JSON object with a \"type\"")


def parse_body(raw: str | bytes) -> dict[str, Any]:
    """An HTTP body as a JSON object; ``BadRequest`` saying why it is not one."""
    return json_object(raw, BadRequest, "body:", "body: must be a JSON object")


def json_object(raw: str | bytes, error: Callable[[str], Exception], subject: str,
                not_object: str) -> dict[str, Any]:
    """``raw`` as a JSON object, or ``error`` raised with ``subject`` and what is
    wrong ("nested too deeply", "not valid JSON"), or with ``not_object``."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise error(f"{subject} nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise error(f"{subject} not valid JSON") from None
    if not isinstance(data, dict):
        raise error(not_object)
    return data


def message_type(data: dict[str, Any]) -> str:
    """The ``type`` of a socket message; ``BadMessage`` when it has none."""
    kind = data.get("type")
    if not isinstance(kind, str):
        raise BadMessage("message has no \"type\" string")
    return kind


def refuse_unknown_fields(data: dict[str, Any], kind: str, fields: tuple[str, ...]) -> None:
    """``BadMessage`` naming the first field of a ``kind`` message that is not in
    ``fields`` (besides ``type``), for a vendor front whose vendor refuses such a
    field: the server would not act on it, so it is refused, never dropped. The
    native sockets ignore unknown fields instead, as PROTOCOL.md says."""
    unknown = sorted(set(data) - {"type", *fields})
    if unknown:
        listed = ", ".join(fields) or "(none besides type)"
        raise BadMessage(f"{kind}.{unknown[0][:40]}: not a field of {kind}; its fields are: {listed}")


def optional_field(data: dict[str, Any], name: str, expected: type[T], message: str) -> T | None:
    """``data[name]`` when it is an ``expected``, None when it is absent or null,
    else ``BadMessage(message)``."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, expected):
        raise BadMessage(message)
    return value


def unknown_type(kind: str, expected: tuple[str, ...]) -> BadMessage:
    """The error for a message whose ``type`` is none of ``expected``."""
    return BadMessage(f"unknown message type {kind[:40]!r}; expected one of: {', '.join(expected)}")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, refused with 413 as soon as it is larger than ``max_bytes``
    (declared or counted while it arrives), so a huge body is never held whole.
    The reading itself is auth.body's, shared with the credential exchange."""
    try:
        return await body.read_body(request, max_bytes)
    except body.BodyTooLarge as exc:
        raise TooLarge(str(exc)) from None


def bounded_request(request: Request, max_bytes: int) -> Request:
    """``request`` whose raw stream raises 413 past ``max_bytes``, for parsers that read
    the stream themselves (multipart uploads): bytes are counted before any parsing."""
    try:
        bounded = body.bounded_request(request, max_bytes)
    except body.BodyTooLarge as exc:
        raise TooLarge(str(exc)) from None
    return Request(bounded.scope, _translate_too_large(bounded.receive))


def _translate_too_large(receive: body.Receive) -> body.Receive:
    async def translated() -> body.Message:
        try:
            return await receive()
        except body.BodyTooLarge as exc:
            raise TooLarge(str(exc)) from None

    return translated


async def read_json_object(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a JSON object: 413 past ``max_bytes``, 400 if not an object."""
    return parse_body(await read_body(request, max_bytes))
