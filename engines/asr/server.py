"""The sidecar's main loop: frames in, policy, decode lanes, events out.

Threads and who owns what:
- a reader thread turns stdin frames into inbox items (and blocks when the
  inbox is full, which pushes back on the gateway through the pipe);
- ``lanes`` decode threads each run one unit of work at a time on the shared
  model (a batch of ``DecodeJob``s decoded together, or one file window;
  lanes.py);
- with an end-of-turn model, one thread answers the streams' questions about
  their pauses (turn_judge.py);
- the main thread owns every ``StreamPolicy``, asks the scheduler
  (scheduler.py) for the next work whenever a lane is free, and writes every
  outgoing frame, so stream state is never shared between threads.

A stream has at most one pending partial, always for its newest audio, so
stale partial work is dropped under load and finals never are. A file
transcription runs one window at a time and rejoins the queue after each
(files.py). Each stream's ``lag_s`` (how old its newest decoded audio was when
the result went out, or how long its pending work has waited) is reported in
partials, finals and a once-a-second ``lag`` event, so a sidecar that cannot
keep up says so.

A frame from the gateway that cannot be used (too large, a header that is not
JSON) is answered with an ``error`` event for the stream or request it names,
and the sidecar reads on. The ``lag`` event also carries ``busy_s``, how long
the longest-running decode has taken, which the gateway's watchdog watches.
A ``ping`` is answered with ``pong`` by the main thread, whatever the decode
lanes are doing: the watchdog pings a sidecar that has been quiet, so one that
is idle is told from one whose main loop is stuck.
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
from .framing import FrameError, FrameRejected, encode_frame, header_prompt, header_terms, pcm_from_bytes, read_frame
from .lanes import DecodeLanes
from .policy import RATE, DecodeJob, StreamPolicy
from .scheduler import Scheduler
from .stream_open import check_language, stream_options
from .tuning import PolicyTuning
from .turn_judge import TurnJudge, TurnQuestion
from .utterance import DEFAULT_FINAL_WINDOW, FINAL_WINDOWS
from .watch import BusyClock

log = logging.getLogger("voxgate.asr")

INBOX_SIZE = 256
LAG_REPORT_S = 1.0
MAX_STREAMS = 10000


class SidecarServer:
    def __init__(self, decoder: WhisperDecoder, out: BinaryIO, model_id: str, *, lanes: int = 1,
                 max_batch: int = 1, final_window: str = DEFAULT_FINAL_WINDOW,
                 tuning: PolicyTuning | None = None, turn_model: Any = None) -> None:
        self.decoder = BusyClock(decoder)  # times every decode, for busy_s in the lag event
        self.out = out
        self.model_id = model_id
        self.languages = decoder.languages()
        self.streams: dict[str, StreamPolicy] = {}
        self.files: deque[FileJob] = deque()
        self.inbox: queue.Queue = queue.Queue(maxsize=INBOX_SIZE)
        self.lanes = lanes
        if final_window not in FINAL_WINDOWS:
            raise ValueError(f"final_window must be one of {', '.join(FINAL_WINDOWS)}, not {final_window!r}")
        self.final_window = final_window
        self.tuning = tuning or PolicyTuning()  # every stream's policy and the scheduler share it
        self.scheduler = Scheduler(lanes=lanes, max_batch=max_batch, tuning=self.tuning)
        self.decode_lanes = DecodeLanes(self.decoder, self.inbox, lanes)
        self.turn_judge = TurnJudge(turn_model, self.inbox) if turn_model is not None else None
        self._busy = 0
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

    def serve(self, stdin: BinaryIO) -> int:
        self.emit({"ev": "ready", "model": self.model_id, "multilingual": self.decoder.multilingual,
                   "languages": self.languages, "turn_model": self.turn_judge is not None})
        reader = threading.Thread(target=self._read_loop, args=(stdin,), name="asr-reader", daemon=True)
        reader.start()
        self.decode_lanes.start()
        if self.turn_judge is not None:
            self.turn_judge.start()
        try:
            while True:
                try:
                    item = self.inbox.get(timeout=LAG_REPORT_S)
                except queue.Empty:
                    item = ("tick", None, None)
                # Everything already in the inbox is handled before the next dispatch: a lane
                # freed by a result must not go to the partial of a stream whose newest audio
                # (perhaps the silence that ends its utterance) is still waiting behind it.
                handled = 0
                while True:
                    if not self._handle(*item):
                        return 0
                    handled += 1
                    if handled >= INBOX_SIZE:  # a flood still gets a dispatch now and then
                        break
                    try:
                        item = self.inbox.get_nowait()
                    except queue.Empty:
                        break
                now = time.monotonic()
                self._dispatch(now)
                self._report_lag(now)
        finally:
            self.decode_lanes.stop()
            if self.turn_judge is not None:
                self.turn_judge.stop()

    def _handle(self, kind: str, a: Any, b: Any) -> bool:
        """One inbox item; False at the end of the input."""
        now = time.monotonic()
        if kind == "eof":
            return False
        if kind == "rejected":
            self._reject(a)
        elif kind == "frame":
            self._guarded(a.get("stream"), self._on_frame, a, b, now)
        elif kind == "file":
            self._busy -= 1
            self._on_file_step(a, b, now)
        elif kind == "results":
            self._busy -= 1
            self._on_results(a, b, now)
        elif kind == "turn":
            self._guarded(a.stream, self._on_turn, a, b, now)
        return True

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
                    question = policy.turns.take()
                    if question is not None and self.turn_judge is not None:
                        self.turn_judge.ask(question)
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
            elif op == "configure":
                policy = self.streams.get(sid)
                if policy is not None:
                    policy.finals.context.configure(header_prompt(header), reset=bool(header.get("reset_context")),
                                                    terms=header_terms(header))
            elif op == "ping":
                self.emit({"ev": "pong"})
            elif op == "close":
                self.streams.pop(sid, None)
                self.scheduler.forget(sid)
            elif op == "transcribe":
                language = header.get("language")
                check_language(language, self.languages, self.model_id)
                self.files.append(FileJob(str(header.get("req")), pcm_from_bytes(payload), language,
                                          bool(header.get("word_timestamps")), now, prompt=header_prompt(header),
                                          terms=header_terms(header)))
            else:
                raise ValueError(f"unknown op {op!r}")
        except (ValueError, FrameError) as exc:
            code = getattr(exc, "code", "bad_request")
            target = {"req": header["req"]} if "req" in header else {"stream": sid}
            self.emit({"ev": "error", **target, "code": code, "message": str(exc)})

    def _open(self, sid: Any, header: dict) -> None:
        if not isinstance(sid, str) or not sid:
            raise ValueError("open needs a stream id")
        if len(self.streams) >= MAX_STREAMS:
            raise ValueError("too many streams")
        options = stream_options(header, self.languages, self.model_id, self.final_window,
                                 turn_model=self.turn_judge is not None)
        self.streams[sid] = StreamPolicy(sid, options, tuning=self.tuning)

    def _after_change(self, sid: str, policy: StreamPolicy) -> None:
        self.emit_all(policy.settle())
        if policy.done:
            self.streams.pop(sid, None)
            self.scheduler.forget(sid)
            self.emit({"ev": "ended", "stream": sid, "utterances": policy.utterances,
                       "audio_s": round(policy.audio_samples / RATE, 3)})

    # ---- decode results and scheduling

    def _on_file_step(self, job: FileJob, result: FileJob | Exception, now: float) -> None:
        if isinstance(result, Exception):
            self.emit({"ev": "error", "req": job.req, "code": "asr_failed", "message": str(result)})
        elif job.finished:
            self.emit(job.result_event())
        else:
            job.since = now  # back in the queue: live streams that waited longer go first
            self.files.append(job)

    def _on_results(self, jobs: list[DecodeJob], results: list[Transcript | Exception], now: float) -> None:
        for job, result in zip(jobs, results, strict=True):
            if job.kind == "partial" and isinstance(result, Transcript):
                self.scheduler.observe_partial(result.decode_s)
            self._guarded(job.stream, self._on_result, job, result, now)

    def _on_result(self, job: DecodeJob, result: Transcript | Exception, now: float) -> None:
        policy = self.streams.get(job.stream)
        if policy is None:
            return
        if isinstance(result, Exception):
            self.emit({"ev": "error", "stream": job.stream, "code": "asr_failed",
                       "message": f"decode failed: {result}"})
            result = Transcript(text="", language=job.language or "en")
        self.emit_all(policy.on_result(job, result, now))
        self._after_change(job.stream, policy)

    def _on_turn(self, question: TurnQuestion, probability: float | None, now: float) -> None:
        policy = self.streams.get(question.stream)
        if policy is not None:
            self.emit_all(policy.on_turn(question, probability, now))
            self._after_change(question.stream, policy)

    def _dispatch(self, now: float) -> None:
        while self._busy < self.lanes:
            work = self.scheduler.next_work(self.streams, self.files, now)
            if work is None:
                return
            self._busy += 1
            self.decode_lanes.submit(work)

    def _report_lag(self, now: float) -> None:
        busy_s = self.decoder.oldest_s(now)
        if now - self._last_lag_report < LAG_REPORT_S or not (self.streams or busy_s):
            return
        self._last_lag_report = now
        lags = {}
        for sid, policy in self.streams.items():
            since = policy.waiting_since()
            waiting = now - since if since is not None else 0.0
            lags[sid] = round(max(policy.lag_s if since is not None else 0.0, waiting), 3)
        self.emit({"ev": "lag", "streams": lags, "busy_s": round(busy_s, 3)})

