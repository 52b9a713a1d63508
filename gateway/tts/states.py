"""The states of a TTS session and the client messages each accepts, with the
session's settings and how it ends (``Closing``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gateway.errors import BadMessage
from gateway.protocol.tts import TextLimits


class TtsState(str, enum.Enum):
    OPEN = "open"  # accepting every message
    ENDING = "ending"  # ``end`` received: finishing what is queued, then ``closed``
    DRAINING = "draining"  # the server stops: finishing what is queued, then close 1001
    CLOSING = "closing"  # the close is decided; nothing more is read or produced


# Which client messages each state accepts, and the state they lead to.
TRANSITIONS: dict[TtsState, dict[str, TtsState]] = {
    TtsState.OPEN: {"speak": TtsState.OPEN, "text": TtsState.OPEN, "flush": TtsState.OPEN,
                    "cancel": TtsState.OPEN, "keepalive": TtsState.OPEN, "end": TtsState.ENDING},
    TtsState.ENDING: {"keepalive": TtsState.ENDING},
    TtsState.DRAINING: {"cancel": TtsState.DRAINING, "flush": TtsState.DRAINING, "keepalive": TtsState.DRAINING,
                        "end": TtsState.ENDING},
    TtsState.CLOSING: {},
}


def transition(state: TtsState, message_type: str) -> TtsState:
    """The state after ``message_type`` in ``state``; ``BadMessage`` if illegal."""
    nxt = TRANSITIONS[state].get(message_type)
    if nxt is None:
        if state is TtsState.ENDING:
            raise BadMessage(f"{message_type!r} after \"end\": the session is finishing and accepts no more work")
        if state is TtsState.DRAINING:
            raise BadMessage(f"{message_type!r} was not taken: {DRAIN_REASON}", code="draining")
        raise BadMessage(f"{message_type!r} is not accepted while the session is {state.value}")
    return nxt


DRAIN_REASON = "the server is stopping; reconnect and retry what has no \"end\" event"
GOING_AWAY_REASON = "server stopping; retry on a new connection"


@dataclass(frozen=True)
class SessionConfig:
    limits: TextLimits
    idle_timeout_s: float = 30.0
    max_buffer_s: float = 2.0  # unsent audio per session before generation pauses
    max_queued_utterances: int = 32
    close_timeout_s: float = 5.0


@dataclass(frozen=True)
class Closing:
    """How the session ends: ``code`` None means the client is already gone."""

    code: int | None
    reason: str = ""
