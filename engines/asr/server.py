"""The sidecar's main loop: frames in, policy, one decode worker, events out.

Threads and who owns what:
- a reader thread turns stdin frames into inbox items (and blocks when the
  inbox is full, which pushes back on the gateway through the pipe);
- the decode worker thread runs one ``DecodeJob`` at a time on the model;
- the main thread owns every ``StreamPolicy``, picks the next job and writes
  every outgoing frame, so stream state is never shared between threads.

A frame from the gateway that cannot be used (too large, a header that is not
JSON) is answered with an ``error`` event for the stream or request it names,
and the sidecar reads on. The ``lag`` event also carries ``busy_s``, how long
the running decode has taken, which the gateway's watchdog watches.

Scheduling: when the worker is free, the job that has waited longest across
all streams runs next (a final counts as having waited 1 s longer than it has;
finals of a stream go before its partials). A stream has at most one pending
partial, always for its newest audio, so stale partial work is dropped under
load and finals never are. A file transcription runs one window at a time and
rejoins the queue after each (files.py). Each stream's ``lag_s`` (how old its
newest decoded audio was when the result went out, or how long its pending
work has waited) is reported in partials, finals and a once-a-second ``lag``
event, so a sidecar that cannot keep up says so.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from typing import Any, BinaryIO

from .decoder import Transcript, WhisperDecoder
from .files import FileJob
from .framing import FrameError, FrameRejected, encode_frame, pcm_from_bytes, read_frame
from .policy import DecodeJob, StreamOptions, StreamPolicy
from .watch import BusyClock

log = logging.getLogger("voxgate.asr")

INBOX_SIZE = 256
LAG_REPORT_S = 1.0
MAX_STREAMS = 10000


class SidecarServer:
    def __init__(self, decoder: WhisperDecoder, out: BinaryIO, model_id: str) -> None:
        self.decoder = BusyClock(decoder)  # times every decode, for busy_s in the lag event
        self.out = out
        self.model_id = model_id
        self.languages = decoder.languages()
        self.streams: dict[str, StreamPolicy] = {}
        self.files: deque[FileJob] = deque()
        self.inbox: queue.Queue = queue.Queue(maxsize=INBOX_SIZE)
        self._work: queue.Queue = queue.Queue(maxsize=1)
        self._busy = False
        self._last_lag_report = 0.0

    # ---- output

    def emit(self, event: dict[str, Any]) -> None:
        self.out.write(encode_frame(event))
        self.out.flush()

    def emit_all(self, events: list[dict]) -> None:
        for event in events:
            self.emit(event)

    # ---- threads

    def _read_loop(self, stdin: BinaryIO) -> None:
        try:
            while True:
                try:
                    frame = read_frame(stdin)
                except FrameRejected as exc:  # answered on the main thread; the next frame is read as usual
                    self.inbox.put(("rejected", exc, None))
                    continue
                if frame is None:
                    break
                self.inbox.put(("frame", *frame))
        except (FrameError, OSError) as exc:
            log.error("bad input from the gateway: %s", exc)
        self.inbox.put(("eof", None, None))

    def _reject(self, exc: FrameRejected) -> None:
        """Answer a frame that could not be used: an error for the stream or request it names."""
        log.error("rejected a frame from the gateway: %s", exc)
        header = exc.header
        req, sid = header.get("req"), header.get("stream")
        target = {"req": req} if isinstance(req, str) else {"stream": sid if isinstance(sid, str) else None}
        self.emit({"ev": "error", **target, "code": exc.code, "message": str(exc)})

    def _work_loop(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            try:
                if isinstance(job, FileJob):
                    job.step(self.decoder)
                    result: Transcript | FileJob | Exception = job
                elif not job.word_timestamps:
                    result = self.decoder.decode_short(job.audio, language=job.language, prefix=job.prefix,
                                                         beam_size=job.beam_size)
                else:
                    result = self.decoder.decode(job.audio, language=job.language, beam_size=job.beam_size,
                                                 prefix=job.prefix, word_timestamps=job.word_timestamps,
                                                 offset_s=job.start_sample / 16000)
            except Exception as exc:  # a failed decode is reported, the sidecar goes on
                log.exception("decode failed")
                result = exc
            self.inbox.put(("result", job, result))

    def serve(self, stdin: BinaryIO) -> int:
        self.emit({"ev": "ready", "model": self.model_id, "multilingual": self.decoder.multilingual,
                   "languages": self.languages})
        reader = threading.Thread(target=self._read_loop, args=(stdin,), name="asr-reader", daemon=True)
        worker = threading.Thread(target=self._work_loop, name="asr-decoder", daemon=True)
        reader.start()
        worker.start()
        try:
            while True:
                try:
                    kind, a, b = self.inbox.get(timeout=LAG_REPORT_S)
                except queue.Empty:
                    kind, a, b = "tick", None, None
                now = time.monotonic()
                if kind == "eof":
                    return 0
                if kind == "rejected":
                    self._reject(a)
                elif kind == "frame":
                    self._guarded(a.get("stream"), self._on_frame, a, b, now)
                elif kind == "result":
                    self._busy = False
                    self._guarded(getattr(a, "stream", None), self._on_result, a, b, now)
                self._dispatch()
                self._report_lag(now)
        finally:
            self._work.put(None)

    def _guarded(self, sid: Any, handler: Any, *args: Any) -> None:
        """Run a handler; a bug hit by one stream drops that stream, never the process
        (a crash would replay the same audio into the next process and crash it too)."""
        try:
            handler(*args)
        except Exception as exc:
            log.exception("stream %s failed", sid)
            if isinstance(sid, str) and self.streams.pop(sid, None) is not None:
                self.emit({"ev": "error", "stream": sid, "code": "asr_failed",
                           "message": f"the ASR sidecar dropped this stream after an internal error: {exc}"})

    # ---- frames from the gateway

    def _on_frame(self, header: dict, payload: bytes, now: float) -> None:
        op, sid = header.get("op"), header.get("stream")
        try:
            if op == "audio":
                policy = self.streams.get(sid)
                if policy is not None:
                    self.emit_all(policy.feed(pcm_from_bytes(payload), now))
            elif op == "open":
                self._open(sid, header)
            elif op in ("finalize", "end"):
                policy = self.streams.get(sid)
                if policy is not None:
                    if op == "end":
                        policy.end(now)
                    else:
                        mark = header.get("id")
                        policy.finalize(now, str(mark) if mark is not None else None)
                    self._after_change(sid, policy)
            elif op == "close":
                self.streams.pop(sid, None)
            elif op == "transcribe":
                language = header.get("language")
                self._check_language(language)
                self.files.append(FileJob(str(header.get("req")), pcm_from_bytes(payload), language,
                                          bool(header.get("word_timestamps")), now))
            else:
                raise ValueError(f"unknown op {op!r}")
        except (ValueError, FrameError) as exc:
            code = getattr(exc, "code", "bad_request")
            target = {"req": header["req"]} if "req" in header else {"stream": sid}
            self.emit({"ev": "error", **target, "code": code, "message": str(exc)})

    def _check_language(self, language: str | None) -> None:
        if language is not None and language not in self.languages:
            err = ValueError(f"model {self.model_id} does not support language {language!r}; "
                             f"available: {', '.join(self.languages[:12])}"
                             + (" ..." if len(self.languages) > 12 else ""))
            err.code = "unsupported_language"  # type: ignore[attr-defined]
            raise err

    def _open(self, sid: Any, header: dict) -> None:
        if not isinstance(sid, str) or not sid:
            raise ValueError("open needs a stream id")
        if len(self.streams) >= MAX_STREAMS:
            raise ValueError("too many streams")
        language = header.get("language")
        self._check_language(language)
        options = StreamOptions(
            language=language, interim=bool(header.get("interim", True)),
            word_timestamps=bool(header.get("word_timestamps", False)),
            silence_ms=int(header.get("silence_ms", 500)), offset=int(header.get("offset", 0)),
            first_utterance=int(header.get("first_utterance", 0)), stable=str(header.get("stable", "")))
        self.streams[sid] = StreamPolicy(sid, options)

    def _after_change(self, sid: str, policy: StreamPolicy) -> None:
        self.emit_all(policy.settle())
        if policy.done:
            self.streams.pop(sid, None)
            self.emit({"ev": "ended", "stream": sid, "utterances": policy.utterances,
                       "audio_s": round(policy.audio_samples / 16000, 3)})

    # ---- decode results and scheduling

    def _on_result(self, job: DecodeJob | FileJob, result: Transcript | FileJob | Exception, now: float) -> None:
        if isinstance(job, FileJob):
            if isinstance(result, Exception):
                self.emit({"ev": "error", "req": job.req, "code": "asr_failed", "message": str(result)})
            elif job.finished:
                self.emit(job.result_event())
            else:
                job.since = now  # back in the queue: live streams that waited longer go first
                self.files.append(job)
            return
        policy = self.streams.get(job.stream)
        if policy is None:
            return
        if isinstance(result, Exception):
            self.emit({"ev": "error", "stream": job.stream, "code": "asr_failed",
                       "message": f"decode failed: {result}"})
            result = Transcript(text="", language=job.language or "en")
        self.emit_all(policy.on_result(job, result, now))
        self._after_change(job.stream, policy)

    def _dispatch(self) -> None:
        if self._busy:
            return
        best_since, best = None, None
        for policy in self.streams.values():
            since = policy.want_since()
            if since is not None and (best_since is None or since < best_since):
                best_since, best = since, policy
        if self.files and (best_since is None or self.files[0].since < best_since):
            self._busy = True
            self._work.put(self.files.popleft())
            return
        if best is not None:
            job = best.take_job()
            if job is not None:
                self._busy = True
                self._work.put(job)

    def _report_lag(self, now: float) -> None:
        busy_s = self.decoder.oldest_s(now)
        if now - self._last_lag_report < LAG_REPORT_S or not (self.streams or busy_s):
            return
        self._last_lag_report = now
        lags = {}
        for sid, policy in self.streams.items():
            since = policy.want_since(head_start=False)
            waiting = now - since if since is not None else 0.0
            lags[sid] = round(max(policy.lag_s if since is not None else 0.0, waiting), 3)
        self.emit({"ev": "lag", "streams": lags, "busy_s": round(busy_s, 3)})
