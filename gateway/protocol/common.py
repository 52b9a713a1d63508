"""Events both sockets share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Closed:
    """The last event of a session the client ended with ``end``: how many
    utterances it had and how much audio (seconds) went through it."""

    utterances: int
    audio_s: float
    type: Literal["closed"] = "closed"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "utterances": self.utterances, "audio_s": round(self.audio_s, 3)}
