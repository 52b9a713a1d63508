"""The gateway's one error hierarchy, and its translation to the wire.

Every error has a machine ``code``. It becomes an HTTP status + ``{"detail"}``,
an ``error`` event, or a WebSocket close, here and nowhere else.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

# WebSocket close codes of PROTOCOL.md
CLOSE_NORMAL = 1000
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_SERVER_ERROR = 1011
CLOSE_TRY_AGAIN = 1013
CLOSE_BAD_REQUEST = 4400
CLOSE_IDLE = 4408


class GatewayError(Exception):
    """An error with a machine code. Subclasses fix the transport mapping."""

    code = "internal_error"
    http_status = 500
    close_code: int | None = None  # None: an error event, the session goes on
    retryable = False

    def __init__(self, message: str, *, code: str | None = None, retryable: bool | None = None,
                 retry_after_s: int | None = None, extra: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.extra = extra or {}

    def to_event(self) -> dict:
        event = {"type": "error", "code": self.code, "message": self.message, "retryable": self.retryable}
        event.update(self.extra)
        return event

    def to_response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None
        body = {"detail": self.message}
        if self.code != "internal_error":
            body["code"] = self.code
        body.update(self.extra)
        return JSONResponse(body, status_code=self.http_status, headers=headers)


class BadRequest(GatewayError):
    """Invalid input that the client can fix (names the field and why)."""

    code = "bad_request"
    http_status = 400
    close_code = CLOSE_BAD_REQUEST


class BadMessage(GatewayError):
    """A WebSocket message that cannot be used; the session goes on."""

    code = "bad_message"
    http_status = 400


class BadAudio(GatewayError):
    code = "bad_audio"
    http_status = 400


class TooLarge(GatewayError):
    code = "too_large"
    http_status = 413
    close_code = CLOSE_TOO_BIG


class OverCapacity(GatewayError):
    code = "over_capacity"
    http_status = 503
    close_code = CLOSE_TRY_AGAIN
    retryable = True

    def __init__(self, message: str, **kw) -> None:
        kw.setdefault("retry_after_s", 5)
        super().__init__(message, **kw)


class NotFound(GatewayError):
    code = "not_found"
    http_status = 404


class Unavailable(GatewayError):
    """A required engine is not ready; the detail says what is missing and how to get it."""

    code = "engine_unavailable"
    http_status = 503
    retryable = False


class ServerError(GatewayError):
    code = "internal_error"
    http_status = 500
    close_code = CLOSE_SERVER_ERROR
