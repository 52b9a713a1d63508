"""The ElevenLabs front's alignment follows the engine's own word timing: a TTS
session running an engine whose streams mark the end of every word (as Piper's
do) starts each word's first character exactly where its audio starts."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import pytest

from gateway.fronts.elevenlabs.context import ContextTransport, Sender
from gateway.fronts.elevenlabs.params import parse_output_format
from gateway.protocol.common import End
from gateway.protocol.tts import Speak, TextLimits
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig
from tests.gateway.fakes import FRAME
from tests.gateway.tts.timed_fake import TimedFakeEngine

TEXT = "Hello there, my wonderful friend."
FRAMES = {TEXT: 5}  # word k of the text ends with frame k: 80 ms a word, whatever its length
RATE = 24000


class RecordingSocket:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    async def send_text(self, text: str) -> None:
        self.messages.append(json.loads(text))


async def test_each_words_first_character_starts_where_the_engine_says_the_word_starts() -> None:
    socket = RecordingSocket()
    transport = ContextTransport(Sender(socket), None, parse_output_format(f"pcm_{RATE}"))  # type: ignore[arg-type]
    engine = TimedFakeEngine(frames_by_text=FRAMES)
    session = TtsSession(transport=transport, engine=engine, voice=None, sample_rate=RATE,
                         encoding=transport.audio.format, config=SessionConfig(limits=TextLimits()))
    transport.queue.put_nowait(Speak(text=TEXT, id="u"))
    transport.queue.put_nowait(End())
    await asyncio.wait_for(session.run(), 30)
    starts: list[tuple[str, float]] = []  # every character and its start on the utterance's clock
    clock_ms = 0.0
    for message in socket.messages:
        alignment = message.get("alignment")
        if alignment:
            starts += [(c, clock_ms + s) for c, s in zip(alignment["chars"], alignment["charStartTimesMs"],
                                                        strict=True)]
        clock_ms += len(base64.b64decode(message.get("audio") or "")) / 2 / RATE * 1000
    assert "".join(c for c, _ in starts) == TEXT
    # word k's audio is frame k; its marked span is the space before it and the word, shared evenly
    frame_ms = FRAME / RATE * 1000
    expected = [(k - 1) * frame_ms + (frame_ms / (len(w) + 1) if k > 1 else 0.0)
                for k, w in enumerate(TEXT.split(), start=1)]
    got = [starts[m.start()][1] for m in re.finditer(r"\S+", TEXT)]
    assert got == pytest.approx(expected, abs=1.0)  # each message's times are whole milliseconds
    # (without the marks the steady 65 ms a character runs past the 400 ms of audio: every word
    # after the first started at 390-400 ms, with the audio's end)
