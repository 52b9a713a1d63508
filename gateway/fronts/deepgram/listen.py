"""``WS /v1/listen``: Deepgram's live transcription socket over the gateway's
own ``DictationSession``.

The transport translates both ways and nothing else: binary audio (G.711
decoded to 16-bit PCM here) and ``KeepAlive`` / ``Finalize`` / ``CloseStream``
become the session's audio, ``keepalive``, ``finalize`` (with an id) and
``end``; the session's ``speech_started`` / ``partial`` / ``final`` /
``finalized`` / ``closed`` / ``error`` events become ``SpeechStarted``,
``Results``, ``UtteranceEnd``, ``Metadata`` and ``Error``.

Finalize: every ``Finalize`` is answered by exactly one ``Results`` with
``from_finalize: true``. The session answers a finalize with an id by a
``finalized`` event right after the final of the utterance it closed (or at
once when none was open). The final of the newest utterance, while a Finalize
waits, is that answer unless the pause had already ended it; a ``finalized``
whose Finalize was not answered that way becomes an empty ``Results`` with
``from_finalize: true``.

``speech_final`` is where the audio says so: on a final the pause closed
(the sidecar marks it), however late it comes, and never on one a Finalize,
the end of the stream or a length cut closed. So a Finalize sent after the
speaker's pause does not take the endpoint from a final still being decoded.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
from collections import deque
from typing import Any

from starlette.websockets import WebSocket

from auth.credentials import answer_subprotocol
from gateway.config import Settings
from gateway.dictation.session import DictationSession
from gateway.dictation.transport import receive_bounded
from gateway.engine_view import public_model_name
from gateway.errors import (
    GatewayError,
    close_code_for,
    close_socket,
)
from gateway.fronts.deepgram import messages as dg
from gateway.fronts.deepgram.params import LISTEN_MODEL_FAMILIES, ListenParams, check_model, parse_listen_params
from gateway.fronts.deepgram.refusal import new_request_id, refuse, request_headers
from gateway.protocol.common import Closed, End, ErrorEvent, Keepalive
from gateway.protocol.dictation import (
    ClientMessage,
    Final,
    Finalize,
    Finalized,
    Partial,
    ServerEvent,
    SpeechStarted,
)

IDLE_TIMEOUT_S = 10.0  # Deepgram closes a stream with no audio and no KeepAlive for 10 s (NET-0001)
NET_0001 = "NET-0001: no audio data or text message was received within the timeout window"


class ListenTransport:
    """The ``DictationTransport`` of one ``/v1/listen`` socket."""

    def __init__(self, websocket: WebSocket, params: ListenParams, request_id: str, model_name: str) -> None:
        self.websocket = websocket
        self.params = params
        self.request_id = request_id
        self.model = dg.ModelInfo(model_name, "whisper")
        self.created = dg.now_iso()
        self._marks = itertools.count(1)
        self._waiting: deque[str] = deque()  # Finalize marks not answered yet, oldest first
        self._answered: set[str] = set()  # answered by a final before their ``finalized`` came
        self._newest = -1  # the newest utterance the session announced
        self._last_end = 0.0  # where the last Results ended (seconds)
        self._audio_bytes = 0
        self._sha = hashlib.sha256()

    @property
    def audio_s(self) -> float:
        width = 2 if self.params.encoding == "linear16" else 1
        return self._audio_bytes / width / self.params.sample_rate

    # ---- client -> session

    async def receive(self) -> bytes | ClientMessage | None:
        text = await receive_bounded(self.websocket)
        if text is None:
            return None
        if isinstance(text, bytes):
            if not text:  # Deepgram's older clients end a stream with an empty binary frame
                return End()
            self._audio_bytes += len(text)
            self._sha.update(text)
            return text  # the session decodes it (codec layer): linear16, mulaw or alaw
        kind = dg.parse_listen_control(text).kind
        if kind == "KeepAlive":
            return Keepalive()
        if kind == "Finalize":
            mark = f"f{next(self._marks)}"
            self._waiting.append(mark)
            return Finalize(id=mark)
        return End()

    # ---- session -> client

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        for message in self._translate(event):
            await asyncio.wait_for(self.websocket.send_json(message), timeout_s)

    def _translate(self, event: ServerEvent) -> list[dict[str, Any]]:
        p = self.params
        if isinstance(event, SpeechStarted):
            self._newest = max(self._newest, event.utterance)
            return [dg.speech_started(event.at)] if p.vad_events else []
        if isinstance(event, Partial):
            if not p.interim_results:
                return []
            return [self._results(event.text, event.start, event.end, is_final=False)]
        if isinstance(event, Final):
            from_finalize = bool(self._waiting) and event.utterance >= self._newest and not event.endpoint
            if from_finalize:
                self._answered.add(self._waiting.popleft())
            out = [self._results(event.text, event.start, event.end, is_final=True,
                                 endpoint=event.endpoint, from_finalize=from_finalize)]
            if p.utterance_end_ms is not None and event.text:
                out.append(dg.utterance_end(event.end))
            return out
        if isinstance(event, Finalized):
            mark = event.id
            if mark in self._answered:
                self._answered.discard(mark)
                return []
            if mark in self._waiting:
                self._waiting.remove(mark)
            return [self._results("", self._last_end, max(self._last_end, self.audio_s), is_final=True,
                                  from_finalize=True)]
        if isinstance(event, Closed):
            return [dg.listen_metadata(request_id=self.request_id, created=self.created, duration_s=self.audio_s,
                                       sha256=self._sha.hexdigest(), model=self.model)]
        if isinstance(event, ErrorEvent):
            return [dg.listen_error(event.code, event.message)]
        return []  # ready: Deepgram says nothing when a stream opens; eager finals are not asked for

    def _results(self, text: str, start: float, end: float, *, is_final: bool, endpoint: bool = False,
                 from_finalize: bool = False) -> dict[str, Any]:
        if is_final:
            self._last_end = max(self._last_end, float(end))
        speech_final = is_final and endpoint and self.params.endpointing
        return dg.results(request_id=self.request_id, model=self.model, text=text, start=float(start),
                          end=float(end), is_final=is_final, speech_final=speech_final, from_finalize=from_finalize)

    async def close(self, code: int, reason: str) -> None:
        if code == close_code_for("idle_timeout"):  # Deepgram closes an idle socket as a server error, NET-0001
            code, reason = close_code_for("internal_error"), NET_0001
        await close_socket(self.websocket, code, reason)


async def listen_socket(websocket: WebSocket) -> None:
    """``/v1/listen``: validate the query and capacity, then run the dictation session."""
    state = websocket.state
    settings: Settings = state.settings
    request_id = new_request_id()
    await websocket.accept(subprotocol=answer_subprotocol(websocket.scope), headers=request_headers(request_id))
    model_name = public_model_name(state.asr.model_name) if state.asr is not None else "none"
    try:
        params = parse_listen_params(websocket.query_params)
        check_model(params.model, [model_name], LISTEN_MODEL_FAMILIES)
    except GatewayError as exc:
        await refuse(websocket, exc, dg.listen_error)
        return
    transport = ListenTransport(websocket, params, request_id, model_name)
    # Deepgram's own idle close, unless the gateway's idle timeout (the ceiling of every vendor timeout) is shorter
    idle_timeout_s = min(IDLE_TIMEOUT_S, settings.idle_timeout_s)
    session = DictationSession(transport, params.dictation, settings, state.asr, idle_timeout_s=idle_timeout_s)
    await state.sessions.run_connection("dictation", websocket, session.describe, session.drain,
                                        functools.partial(refuse, websocket, build=dg.listen_error), session.run)
