"""What ``POST /v1/audio/speech`` makes of OpenAI's fields beyond the text:
which engine a ``model`` names, whether the engine can follow ``instructions``,
the voice a stock OpenAI voice name gets, and ``stream_format: "sse"`` (the
audio as base64 in server-sent events, the way OpenAI streams it).

- ``model``: an engine of this gateway (``pocket``, ``piper``, ``omnivoice``)
  picks it; OpenAI's speech models (``OPENAI_MODELS``) speak with the configured
  default engine; any other name is refused, listing both.
- ``instructions``: OmniVoice's voice description (``instruct``) on an engine
  that takes one; refused on an engine that does not, naming the engines here
  that do.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping

from engines.base import TtsEngine
from gateway.errors import BadRequest

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
# OpenAI's stock voice names; a client written for OpenAI sends one of them and
# gets the engine's default voice unless a voice of that name exists here.
OPENAI_VOICES = frozenset({"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage",
                           "shimmer", "verse", "marin", "cedar"})
SSE_MEDIA_TYPE = "text/event-stream"


def engine_for_model(engines: Mapping[str, TtsEngine], model: str | None, default: str) -> str:
    """The engine id ``model`` names; ``BadRequest`` naming the accepted models."""
    if model is None or model in OPENAI_MODELS:
        return default
    if model in engines:
        return model
    raise BadRequest(f"model: {model[:40]!r} is not a model here; use an engine ({', '.join(sorted(engines))}) or "
                     f"one of OpenAI's ({', '.join(OPENAI_MODELS)}), which speak with the default engine ({default})")


def speech_options(engines: Mapping[str, TtsEngine], engine: TtsEngine, instructions: str | None) -> dict[str, str]:
    """``SynthesisOptions.extra`` for the request: ``instruct`` from ``instructions``,
    refused (naming the engines that take it) where the engine takes none."""
    if instructions is None:
        return {}
    if "instruct" not in engine.info().options:
        able = sorted(e for e, other in engines.items() if "instruct" in other.info().options)
        where = f"use model={able[0]}" if able else "no engine on this server follows instructions"
        raise BadRequest(f"instructions: the {engine.info().id} engine cannot follow instructions (it takes no "
                         f"voice description); {where}, or leave instructions out")
    return {"instruct": instructions}


def openai_voice(engine: TtsEngine, voice: str | None) -> str | None:
    """A stock OpenAI voice name the engine lacks stands for its default voice (None)."""
    if voice in OPENAI_VOICES and voice not in {v.id for v in engine.voices()}:
        return None
    return voice


async def sse_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """OpenAI's speech events: one ``speech.audio.delta`` (base64 audio) per chunk,
    then ``speech.audio.done`` with a usage object of zeros (this server counts no tokens).
    A stream that fails mid-way ends without ``done``, so the client can tell."""
    async for chunk in chunks:
        delta = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode("ascii")}
        yield f"data: {json.dumps(delta)}\n\n".encode("ascii")
    done = {"type": "speech.audio.done",
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
    yield f"data: {json.dumps(done)}\n\n".encode("ascii")
