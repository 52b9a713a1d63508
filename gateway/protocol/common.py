"""Messages both sockets share: the client's ``end`` and ``keepalive``, the
server's ``closed`` and ``error``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.errors import GatewayError
from gateway.protocol.wire import INLINE, WireMessage, internal, rounded


@dataclass(frozen=True)
class End:
    type: Literal["end"] = "end"


@dataclass(frozen=True)
class Keepalive:
    type: Literal["keepalive"] = "keepalive"


@dataclass(frozen=True)
class Closed(WireMessage):
    """The last event of a session the client ended with ``end``: how many
    utterances it had and how much audio (seconds) went through it."""

    utterances: int
    audio_s: float = field(metadata=rounded(3))
    type: Literal["closed"] = "closed"


@dataclass(frozen=True)
class ErrorEvent(WireMessage):
    """An ``error`` event: a machine code of gateway/errors.py and why.
    ``close_code`` is None when the session goes on after it, else the code the
    socket closes with once it is sent (it is not part of the event)."""

    code: str
    message: str
    retryable: bool
    extra: Mapping[str, Any] = field(default_factory=dict, metadata=INLINE)
    close_code: int | None = internal(None)
    type: Literal["error"] = "error"

    @classmethod
    def of(cls, error: GatewayError, *, closes: bool = False) -> ErrorEvent:
        """The event for ``error``; ``closes``: the session ends with the error's close code."""
        return cls(error.code, error.message, error.retryable, dict(error.extra),
                   error.close_code if closes else None)
