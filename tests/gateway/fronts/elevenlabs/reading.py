"""Reading an ElevenLabs socket in the front's tests."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from gateway.audio import Encoding, encode
from tests.gateway.fakes import expected_audio
from tests.support.sockets import receive

STREAM = "/v1/text-to-speech/alba/stream-input"
MULTI = "/v1/text-to-speech/alba/multi-stream-input"


@dataclass
class Heard:
    """What one context (or the one stream) received, in order."""

    audio: bytes = b""
    chunks: int = 0  # messages with audio
    chars: str = ""  # the alignment's characters, joined
    final: bool = False
    errors: list[dict] = field(default_factory=list)


def read_until_final(ws, *, context: str | None = None, contexts: dict[str | None, Heard] | None = None) -> Heard:
    """Read until the ``isFinal`` of ``context`` (any messages of other contexts go to ``contexts``)."""
    contexts = contexts if contexts is not None else {}
    while True:
        message = receive(ws)
        heard = contexts.setdefault(message.get("contextId"), Heard())
        if "error" in message:
            heard.errors.append(message)
        if message.get("audio"):
            heard.audio += base64.b64decode(message["audio"])
            heard.chunks += 1
        if message.get("alignment"):
            assert message["alignment"] == message["normalizedAlignment"]
            heard.chars += "".join(message["alignment"]["chars"])
        if message.get("isFinal"):
            heard.final = True
            if message.get("contextId") == context:
                return heard


def pcm_of(*sentences: str) -> bytes:
    """The 24 kHz 16-bit audio the fake engine makes for ``sentences``, one utterance each."""
    return b"".join(encode(expected_audio(s), Encoding.S16LE) for s in sentences)


def samples_of(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
