"""The gateway's one error table and its translation to the wire.

Every machine code the gateway sends is a row of ``CODES``: its HTTP status, the
WebSocket close code used when that error ends a socket (``None``: it never
does, it is an ``error`` event and the session goes on) and whether a client
should retry. A ``GatewayError`` carries a code and a human message; it becomes
an HTTP response, an ``error`` event or a close here and nowhere else, and
every socket closes through ``close_socket``, which keeps the reason within the
123 bytes a close frame allows. A close that is no error (a normal end, ...) is
a named row of ``ENDS``; a site asks ``close_code_for`` the code of what
happened, so every close code and its meaning is written here and nowhere else.

The auth middleware's refusals have codes too (auth/codes.py); they are rows of
the same table so clients switch on one vocabulary.

Longer than 300 lines: the table is one row per machine code, and splitting it would split the vocabulary.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from auth import codes as auth_codes

log = logging.getLogger("voxgate")

# WebSocket close codes of the protocol (docs/protocol.md)
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_SERVER_ERROR = 1011
CLOSE_TRY_AGAIN = 1013
CLOSE_BAD_REQUEST = 4400
CLOSE_IDLE = 4408
CLOSE_RESUME_UNKNOWN = 4404
CLOSE_RESUME_USED = 4409
CLOSE_RESUME_GONE = 4410
CLOSE_RESUME_ELSEWHERE = 4421  # after HTTP 421 Misdirected Request

MAX_CLOSE_REASON_BYTES = 123  # RFC 6455: 125 bytes of close payload, 2 of them the code
CLOSE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class WireCode:
    code: str
    http_status: int
    close_code: int | None  # None: only ever an ``error`` event, the session goes on
    retryable: bool
    meaning: str  # one line for docs/protocol.md


_ROWS = (
    # the request or message is wrong; the client can fix it
    WireCode("bad_request", 400, CLOSE_BAD_REQUEST, False,
             "a query parameter or request field is invalid; the message names it and says why"),
    WireCode("bad_message", 400, None, False,
             "a socket message cannot be used (not JSON, unknown type, a bad field); it is ignored"),
    WireCode("bad_audio", 400, None, False,
             "audio that cannot be decoded (a malformed file, a corrupt packet, NaN samples), with the reason; "
             "on a live socket the message is dropped, except in a webm/ogg stream, which then closes 4400"),
    WireCode("too_large", 413, CLOSE_TOO_BIG, False, "a body, upload or socket message over its size limit"),
    WireCode("text_too_long", 413, None, False, "a text over the per-utterance limit (2000 characters)"),
    WireCode("too_many_utterances", 429, None, True,
             "32 utterances are already queued on this socket; wait for an `end` event"),
    WireCode("unknown_engine", 400, CLOSE_BAD_REQUEST, False, "no engine of that name; the message lists them"),
    WireCode("unknown_voice", 400, CLOSE_BAD_REQUEST, False, "the engine has no such voice; `voices` lists them"),
    WireCode("voice_not_found", 404, None, False, "the voice to delete does not exist"),
    WireCode("voice_exists", 409, None, False, "a voice of that id exists already"),
    WireCode("voice_builtin", 400, None, False, "built-in voices cannot be deleted"),
    WireCode("clone_unsupported", 400, None, False, "the engine (or this checkpoint) cannot clone voices"),
    WireCode("unsupported_language", 400, CLOSE_BAD_REQUEST, False,
             "the ASR model does not know that language; the message lists the ones it does"),
    # capacity and availability
    WireCode("over_capacity", 503, CLOSE_TRY_AGAIN, True, "too many sessions or queued requests; retry later"),
    WireCode("engine_loading", 503, CLOSE_TRY_AGAIN, True, "the engine is still loading; retry in a few seconds"),
    WireCode("engine_unavailable", 503, CLOSE_SERVER_ERROR, False,
             "the engine is missing or failed to load; the message names it and its state, and an admin reads "
             "why in `GET /v1/engines`"),
    WireCode("codec_unavailable", 503, CLOSE_SERVER_ERROR, False,
             "the server's FFmpeg (PyAV) is missing or lacks the codec of this format; the message says how to "
             "install it"),
    WireCode("asr_unavailable", 503, CLOSE_TRY_AGAIN, True,
             "the ASR sidecar is (re)starting; live audio is kept and replayed, nothing is lost"),
    WireCode("asr_timeout", 503, None, True, "a file transcription did not finish in time"),
    WireCode("asr_failed", 500, None, False, "the recognizer failed on this audio"),
    WireCode("draining", 503, CLOSE_TRY_AGAIN, True,
             "the server is draining before it stops and takes no new sessions or work; retry (behind a "
             "load balancer the retry reaches another replica)"),
    WireCode("going_away", 503, CLOSE_GOING_AWAY, True,
             "the server is stopping: this session's work up to the drain is done; reconnect and retry"),
    WireCode("engine_error", 500, None, False, "the TTS engine failed on this utterance"),
    WireCode("engine_timeout", 503, None, True, "the TTS engine produced no frame in time"),
    # resuming a dropped /v1/dictation or /v1/tts session (gateway/resume_tokens.py)
    WireCode("resume_unknown", 404, CLOSE_RESUME_UNKNOWN, False,
             "no session of this server has that resume token (mistyped, from another server, or forgotten "
             "long after its session ended); open a new session"),
    WireCode("resume_elsewhere", 421, CLOSE_RESUME_ELSEWHERE, False,
             "the resume token belongs to a session of another replica, which the message names; the load balancer "
             "must route each resume by its token's prefix (docs/deployment.md)"),
    WireCode("resume_used", 409, CLOSE_RESUME_USED, False,
             "that resume token was already used by a reconnect; resume with the token of the latest `ready`"),
    WireCode("resume_expired", 410, CLOSE_RESUME_GONE, False,
             "the session outlived its grace after the drop (`VOXGATE_RESUME_GRACE_S`) and ended; the messages "
             "it sent are given once before this error; open a new session"),
    WireCode("resume_lost", 410, CLOSE_RESUME_GONE, False,
             "the messages after `last_seq` are no longer kept (the session's held messages passed their memory cap); "
             "what is kept is given once before this error; open a new session"),
    WireCode("resume_forbidden", 403, CLOSE_POLICY, False,
             "the resume token belongs to a session another principal opened"),
    # the socket itself
    WireCode("idle_timeout", 408, CLOSE_IDLE, False, "no message, or no reading by the client, for `idle_timeout_s`"),
    WireCode("internal_error", 500, CLOSE_SERVER_ERROR, False, "a bug or an unexpected failure on the server"),
    # the auth middleware and the credential exchange (auth/codes.py)
    WireCode(auth_codes.PIN_REQUIRED, 401, CLOSE_POLICY, False,
             "LAN sharing is on: present the PIN (`detail`: `PIN required`)"),
    WireCode(auth_codes.API_KEY_REQUIRED, 401, CLOSE_POLICY, False,
             "present the API key or a session/ticket minted from it, or the presented one is invalid "
             "(`detail`: `API key required`)"),
    WireCode(auth_codes.LOOPBACK_REQUIRED, 403, CLOSE_POLICY, False,
             "no credential can help: only this machine may do that (`detail`: `loopback origin required`)"),
    WireCode(auth_codes.ADMIN_REQUIRED, 403, CLOSE_POLICY, False,
             "admin route: loopback, or the admin API key in server mode "
             "(`detail`: `loopback origin or admin API key required`)"),
    WireCode(auth_codes.ORIGIN_REJECTED, 403, CLOSE_POLICY, False,
             "a cookie or ambient credential from a page of another origin (`detail`: `browser origin rejected`)"),
    WireCode(auth_codes.TOO_MANY_ATTEMPTS, 429, CLOSE_POLICY, True,
             "more than 10 failed credential attempts in 60 s; wait `Retry-After` seconds"),
    WireCode(auth_codes.AUTH_NOT_READY, 503, CLOSE_POLICY, True, "the server is starting or stopping"),
    WireCode(auth_codes.SHARE_UNAVAILABLE, 503, None, False, "LAN sharing cannot start here; the detail says why"),
    WireCode(auth_codes.HOST_REJECTED, 400, CLOSE_POLICY, False,
             "the `Host` is not a name this server answers to; list it in `VOXGATE_ALLOWED_HOSTS`"),
    WireCode(auth_codes.TOO_MANY_TOKENS, 429, None, True,
             "the caller holds as many live sessions or tickets as it may; revoke some or wait for them to expire"),
    WireCode(auth_codes.AUTH_STORE_UNAVAILABLE, 503, CLOSE_TRY_AGAIN, True,
             "the shared auth store (Redis) is unreachable: sessions, tickets and the PIN cannot be checked; "
             "the API key and loopback still work (`detail`: `authentication store unavailable`)"),
)

CODES: dict[str, WireCode] = {row.code: row for row in _ROWS}


@dataclass(frozen=True)
class SocketEnd:
    """A close that is no error: the session ended the way its protocol says."""

    name: str
    close_code: int
    meaning: str


# Every close the gateway sends is an error's (its row of ``CODES``) or one of these.
_ENDS = (
    SocketEnd("normal_end", CLOSE_NORMAL,
              "the session ended as asked (after `closed`, or the front's own last message)"),
    SocketEnd("events_overflowed", CLOSE_SERVER_ERROR,
              "the client read so slowly that a transcript event could not be queued; closed rather than lose it"),
    SocketEnd("policy_violation", CLOSE_POLICY,
              "a message the front's protocol does not allow there (an ElevenLabs socket whose first message is "
              "not text)"),
)

ENDS: dict[str, SocketEnd] = {end.name: end for end in _ENDS}  # no name is also a row of CODES


def close_code_for(name: str) -> int:
    """The close code of ``name``: a row of ``CODES`` that closes a socket
    (``idle_timeout``, ``going_away``, ``too_large`` ...) or an end of ``ENDS``.
    Sites name what happened; the number comes from here."""
    end = ENDS.get(name)
    if end is not None:
        return end.close_code
    row = CODES.get(name)
    if row is None or row.close_code is None:
        raise ValueError(f"{name!r} is neither an end of gateway.errors.ENDS nor a code that closes a socket")
    return row.close_code


def markdown_table() -> str:
    """docs/protocol.md's table of machine codes, generated from ``CODES``."""
    rows = ["| code | HTTP | closes a socket with | retryable | meaning |", "|---|---|---|---|---|"]
    for row in _ROWS:
        close = str(row.close_code) if row.close_code is not None else "(an `error` event; the session goes on)"
        rows.append(f"| `{row.code}` | {row.http_status} | {close} | {'yes' if row.retryable else 'no'} "
                    f"| {row.meaning} |")
    return "\n".join(rows)


class GatewayError(Exception):
    """An error with a machine code from ``CODES``. Subclasses only fix the
    default code; the table decides status, close code and retryability."""

    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, retry_after_s: int | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if self.code not in CODES:
            raise ValueError(f"{self.code!r} is not a code of gateway.errors.CODES")
        self.retry_after_s = retry_after_s
        self.extra = extra or {}

    @property
    def wire(self) -> WireCode:
        return CODES[self.code]

    @property
    def http_status(self) -> int:
        return self.wire.http_status

    @property
    def close_code(self) -> int:
        """The close code when this error ends a socket. Event-only codes that
        must refuse a socket anyway close 1013 when retryable, else 1011."""
        wire = self.wire
        if wire.close_code is not None:
            return wire.close_code
        return CLOSE_TRY_AGAIN if wire.retryable else CLOSE_SERVER_ERROR

    @property
    def retryable(self) -> bool:
        return self.wire.retryable

    def to_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {"type": "error", "code": self.code, "message": self.message,
                                 "retryable": self.retryable}
        event.update(self.extra)
        return event

    def to_response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None
        body: dict[str, Any] = {"detail": self.message, "code": self.code}
        body.update(self.extra)
        return JSONResponse(body, status_code=self.http_status, headers=headers)


class BadRequest(GatewayError):
    """Invalid input the client can fix (the message names the field and why)."""

    code = "bad_request"


class BadMessage(GatewayError):
    """A socket message that cannot be used; the session goes on."""

    code = "bad_message"


class BadAudio(GatewayError):
    code = "bad_audio"


class TooLarge(GatewayError):
    code = "too_large"


class OverCapacity(GatewayError):
    code = "over_capacity"

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("retry_after_s", 5)
        super().__init__(message, **kw)


class Draining(OverCapacity):
    """New sessions and work are refused while the server drains (it is an
    over-capacity answer: retry, elsewhere when there is an elsewhere)."""

    code = "draining"


class Unavailable(GatewayError):
    """A required engine is not ready; the message says what is missing and how to get it."""

    code = "engine_unavailable"


def close_reason(text: str) -> str:
    """``text`` cut to fit a close frame: at most 123 bytes of UTF-8, never
    splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= MAX_CLOSE_REASON_BYTES:
        return text
    return data[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore")


async def close_socket(websocket: WebSocket, code: int, reason: str = "",
                       timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Close ``websocket`` with ``code`` and a safely cut ``reason``. Every
    socket of the gateway closes here. False when the close could not be sent
    (the client left, or does not read)."""
    try:
        await asyncio.wait_for(websocket.close(code, close_reason(reason)), timeout_s)
    except Exception:  # the client is gone or not reading: nothing more to do
        log.debug("close %s not delivered", code)
        return False
    return True


async def refuse_socket(websocket: WebSocket, error: GatewayError, *, send_event: bool = True,
                        timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Tell the client why (an ``error`` event, unless ``send_event`` is off)
    and close with the error's close code and its message as the reason."""
    if send_event:
        try:
            await asyncio.wait_for(websocket.send_json(error.to_event()), timeout_s)
        except Exception:  # the client left first; the close below is a no-op then
            log.debug("refusal event not delivered")
    await close_socket(websocket, error.close_code, error.message, timeout_s)


if __name__ == "__main__":
    print(markdown_table())
