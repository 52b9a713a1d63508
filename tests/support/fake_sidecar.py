"""A sidecar supervisor with no process, for socket and route tests.

``FakeSidecar`` is a real ``AsrSupervisor`` (streams, retention, event filter)
whose pipe is a list: ``frames`` records every frame the gateway writes, and
tests play the sidecar by calling ``on_frame(header)`` on the event loop with
the header the sidecar would send (it goes through the pipe codec); ``play``
does that for the one open stream, ``play_from_thread`` from a TestClient test.
An ``end`` is answered with ``ended`` at once, like a sidecar with nothing left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from starlette.testclient import TestClient

from engines.base import EngineState, EngineStatus
from gateway.dictation.pipe import Ended, Hello
from gateway.dictation.sidecar import AsrSupervisor
from gateway.dictation.stream import AsrStream


class FakeSidecar(AsrSupervisor):
    def __init__(self, languages: tuple[str, ...] = ("en",), state: EngineState = EngineState.READY,
                 detail: str = "", hint: str = "", transcription: dict | None = None) -> None:
        super().__init__(model="tiny.en", data_dir=Path("/nonexistent"))
        self.frames: list[tuple[dict[str, Any], bytes]] = []
        self._languages = list(languages)
        self._final_state = EngineStatus(state, detail, hint)
        self.transcription = transcription
        self.transcribe_calls: list[dict[str, Any]] = []

    async def start(self) -> None:
        self._state = self._final_state
        if self._state.state is EngineState.READY:
            self._hello = Hello("tiny.en", len(self._languages) > 1, self._languages)
            self._ready.set()
        self._settled.set()

    async def aclose(self) -> None:
        return None

    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        self.frames.append((header, payload))
        if header.get("op") == "end":
            stream = self.streams.get(header["stream"])
            if stream is not None:
                stream.deliver(Ended(0, 0.0))

    async def transcribe(self, samples: np.ndarray, *, language: str | None, word_timestamps: bool,
                         timeout_s: float, prompt: str = "", terms: tuple[str, ...] = ()) -> dict[str, Any]:
        call: dict[str, Any] = {"samples": len(samples), "language": language, "word_timestamps": word_timestamps}
        if prompt:  # only a request that carries one shows it
            call["prompt"] = prompt
        if terms:
            call["terms"] = terms
        self.transcribe_calls.append(call)
        return dict(self.transcription or {})

    def audio_sent(self, stream_id: str) -> np.ndarray:
        chunks = [np.frombuffer(p, dtype="<f4") for h, p in self.frames
                  if h.get("op") == "audio" and h.get("stream") == stream_id]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)

    def ops(self, stream_id: str) -> list[str]:
        return [h["op"] for h, _ in self.frames if h.get("stream") == stream_id]

    def the_stream(self) -> AsrStream:
        """The one open stream (a test that opened exactly one)."""
        streams = list(self.streams.values())
        assert len(streams) == 1, f"expected one open ASR stream, found {len(streams)}"
        return streams[0]

    def play(self, *events: dict[str, Any]) -> None:
        """On the event loop: ``events`` (pipe headers without ``stream``) reach
        the one open stream as if the recognizer sent them."""
        stream_id = self.the_stream().id
        for event in events:
            self.on_frame({"stream": stream_id, **event})

    def play_from_thread(self, client: TestClient, *events: dict[str, Any]) -> None:
        """``play`` from a TestClient test's thread, on the client's event loop."""
        client.portal.call(self.play, *events)
