"""The ``DictationTransport`` of one Wyoming transcription: the connection
hands it audio and the end, the shared ``DictationSession``
(gateway/dictation/session.py) reads them and hands back its events, which
become Wyoming's streaming transcript.

Client side: ``offer`` queues audio (16-bit mono samples as
``pcm_f32le`` at the stream's rate; the session resamples) or the end in a
small bounded inbox. While the session holds the stream to real time it does
not read, the inbox fills and ``offer`` waits, so the connection reads no
further event and TCP pushes back on the client. ``offer`` drops what it holds
once the session reads no more (it ended, or the answer is out).

Server side: ``transcript-start`` at the first speech (once per
transcription), a ``transcript-chunk`` whenever a partial or a final adds
words (chunks.py says which), then the ``transcript`` event (all finals,
space-joined: the answer; each the utterance's own decode, even where the
streamed words kept a partial's committed word) and ``transcript-stop``.

Endpointing (``endpoint`` true, from ``vad_sensitivity``): the first final that
holds words is the answer, sent at once; then ``receive`` tells the session
the client is done, and later audio is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.errors import close_code_for
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.chunks import Chunker
from gateway.fronts.wyoming.link import Link, PeerGone
from gateway.protocol.common import Closed, ErrorEvent
from gateway.protocol.dictation import ClientMessage, Final, Partial, Ready, ServerEvent, SpeechStarted

log = logging.getLogger("voxgate.wyoming")

INBOX_ITEMS = 4  # audio messages waiting for the session: what the connection reads ahead of the pacing


class TranscriptTransport:
    def __init__(self, link: Link, language: str | None, *, endpoint: bool) -> None:
        self.link = link
        self.endpoint = endpoint
        self.answered = False  # transcript and transcript-stop are out
        self.ended: asyncio.Event = asyncio.Event()  # the session closed (or the answer is out): it reads no more
        self.failure: tuple[int, str] | None = None  # the session's close when it was not the normal end
        self.error_sent = False
        self._inbox: asyncio.Queue[bytes | ClientMessage] = asyncio.Queue(INBOX_ITEMS)
        self._language = language
        self._ready = False  # the session opened the stream: an error now is the stream's, not a refusal
        self._started = False  # transcript-start sent
        self._finals: list[str] = []
        self._chunks = Chunker()

    @property
    def utterances(self) -> int:
        return len(self._finals)

    # ---- connection -> session

    async def offer(self, item: bytes | ClientMessage) -> None:
        """Queue ``item`` for the session, waiting while the inbox is full; dropped
        once the session reads no more."""
        if self.ended.is_set():
            return
        put = asyncio.ensure_future(self._inbox.put(item))
        ended = asyncio.ensure_future(self.ended.wait())
        try:
            await asyncio.wait({put, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (put, ended):
                waiter.cancel()

    async def receive(self) -> bytes | ClientMessage | None:
        if self.ended.is_set():
            return None
        get = asyncio.ensure_future(self._inbox.get())
        ended = asyncio.ensure_future(self.ended.wait())
        try:
            await asyncio.wait({get, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not get.done():
                get.cancel()
        if get.done() and not get.cancelled():
            return get.result()
        return None  # endpointed: the session has nothing more to give

    # ---- session -> client

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._relay(event), timeout_s)
        except PeerGone:
            raise asyncio.TimeoutError from None  # the session ends as for a client that reads nothing

    async def close(self, code: int, reason: str) -> None:
        """The session is over. Its drain (1001) answers with the finals so far; any
        other close but the normal one is a failure the connection reports."""
        if code == close_code_for("going_away") and not self.answered:
            with contextlib.suppress(PeerGone):  # the client left: nobody to answer
                await self.answer()
        elif code != close_code_for("normal_end") and not self.answered:
            self.failure = (code, reason)
        self.ended.set()

    async def _relay(self, item: ServerEvent) -> None:
        if isinstance(item, Ready):
            self._ready = True
        elif isinstance(item, ErrorEvent):
            await self._error(item)
        elif self.answered:
            return
        elif isinstance(item, SpeechStarted):
            await self._start()
        elif isinstance(item, Partial):
            await self._chunk(self._chunks.partial(item.text, item.stable))
        elif isinstance(item, Final):
            await self._final(item)
        elif isinstance(item, Closed):
            await self.answer()

    async def _error(self, event: ErrorEvent) -> None:
        if self._ready and event.retryable:
            log.info("wyoming %s: %s", self.link.client, event.message)
            return  # a sidecar restart: the session replays the stream, the transcript goes on
        self.error_sent = True
        await self.link.send(msg.error(event.message, event.code))

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            await self.link.send(msg.transcript_start(self._language))

    async def _chunk(self, chunk: str | None) -> None:
        if chunk:
            await self._start()
            await self.link.send(msg.transcript_chunk(chunk))

    async def _final(self, final: Final) -> None:
        text = final.text.strip()
        if final.language:
            self._language = final.language
        await self._chunk(self._chunks.final(text))
        # the answer is the utterance's own decode (as offline decoding reads it), not the streamed
        # words it promised to keep: the chunks already carry those
        answer = final.decoded.strip() if final.decoded is not None else text
        if answer:
            self._finals.append(answer)
        if answer and self.endpoint:
            await self.answer()

    async def answer(self) -> None:
        """``transcript`` (every final so far) and ``transcript-stop``, once."""
        if self.answered:
            return
        self.answered = True
        if self.endpoint:
            self.ended.set()  # the voice command is over: the session stops reading
        await self._start()
        await self.link.send(msg.transcript(" ".join(self._finals), self._language))
        await self.link.send(msg.transcript_stop())
