"""The Pocket TTS engine the gateway talks to (``engines.base.TtsEngine``).

Loading runs in a thread; the model then belongs to one ``BatchScheduler`` worker
thread, which steps every open stream together. Built-in voices come from the
model directory's ``embeddings/``; cloned voices are kept as voice files (the
shipped layout) in ``voices_dir`` and survive restarts.

Concurrency contract: every public method is called from the event loop and
returns quickly; model compute (prompting, stepping, cloning) happens on the
scheduler's worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
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
from engines.files import write_atomically
from engines.options import check_options
from engines.pocket.scheduled_stream import ScheduledStream
from engines.pocket.scheduler import BatchScheduler

log = logging.getLogger(__name__)

ENGINE_ID = "pocket"
SAMPLE_RATE = 24000
FRAME_SAMPLES = 1920
PREFERRED_DEFAULT_VOICE = "alba"
GET_MODEL_HINT = ("run `voxgate models pull pocket` to download it, or "
                  "`voxgate models make-random pocket DIR` for random weights (then set VOXGATE_POCKET_DIR=DIR)")
_VOICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEMPERATURE = 2.0
TRANSCRIPT_REFUSED = ("ref_text: the pocket engine clones a voice from the audio alone and takes no transcript; "
                      "leave ref_text out")
OPTIONS = ("seed", "temperature")  # English only, voices from audio: no language, instruct or speaker


class PocketEngine(LoadsInThread):
    """Pocket TTS behind the ``TtsEngine`` interface."""

    display_name = "Pocket TTS"

    def __init__(self, model_dir: Path, voices_dir: Path, quantize: str = "none", threads: int = 0, *,
                 max_streams: int = 8, max_waiting: int = 32, decode_chunk: int = 4,
                 decode_lead_s: float | None = None, decoder_precision: str = "fp32") -> None:
        if quantize not in ("none", "int8"):
            raise ValueError(f"quantize: must be 'none' or 'int8', got {quantize!r}")
        from engines.pocket.decoder_precision import check

        check(decoder_precision)  # refused here, at startup, not when the model loads
        self.decoder_precision = decoder_precision
        self.model_dir, self.voices_dir = Path(model_dir), Path(voices_dir)
        self.quantize, self.threads = quantize, threads
        self.max_streams, self.max_waiting = max_streams, max_waiting
        self.decode_chunk, self.decode_lead_s = decode_chunk, decode_lead_s  # see BatchScheduler
        self._status = EngineStatus(EngineState.LOADING)
        self._model = None
        self._scheduler: BatchScheduler | None = None
        self._builtin: dict = {}  # voice id -> VoiceState
        self._cloned: dict = {}

    # ---- lifecycle
    def _load_blocking(self) -> None:
        """Load the model directory."""
        from engines.pocket.errors import PocketModelError
        from engines.pocket.model import MODEL_FILE, load_model

        weights = self.model_dir / MODEL_FILE
        if not weights.is_file():
            self._status = EngineStatus(EngineState.MISSING, detail=f"Pocket TTS weights not found: {weights}",
                                        hint=GET_MODEL_HINT)
            return
        try:
            model = load_model(self.model_dir, quantize=self.quantize == "int8")
            if self.decoder_precision != "fp32":
                from engines.pocket.decoder_precision import apply_decoder_precision

                apply_decoder_precision(model.mimi, self.decoder_precision)
            builtin = {voice_id: model.load_voice(voice_id) for voice_id in model.voice_ids()}
        except PocketModelError as exc:
            state = EngineState.MISSING if exc.code == "model_file_missing" else EngineState.FAILED
            self._status = EngineStatus(state, detail=str(exc), hint=GET_MODEL_HINT)
            return
        self._model, self._builtin = model, builtin
        self._cloned = self._read_cloned_voices()
        self._scheduler = BatchScheduler(model, max_streams=self.max_streams, max_waiting=self.max_waiting,
                                         threads=self.threads, decode_chunk=self.decode_chunk,
                                         lead_s=self.decode_lead_s)
        self._scheduler.start()
        self._status = EngineStatus(EngineState.READY)

    def _read_cloned_voices(self) -> dict:
        out = {}
        if not self.voices_dir.is_dir():
            return out
        for path in sorted(self.voices_dir.glob("*.safetensors")):
            try:
                out[path.stem] = self._model.read_voice(path)
            except EngineError as exc:  # e.g. cloned with another model geometry
                log.warning("skipping voice file %s: %s", path, exc)
        return out

    async def close(self) -> None:
        if self._scheduler is not None:
            scheduler, self._scheduler = self._scheduler, None
            await asyncio.to_thread(scheduler.close)
        self._mark_closed()

    # ---- description
    def info(self) -> TtsInfo:
        return TtsInfo(id=ENGINE_ID, sample_rate=SAMPLE_RATE, frame_samples=FRAME_SAMPLES, languages=("en",),
                       can_clone=bool(self._model is not None and self._model.can_clone),
                       default_voice=self.default_voice(), options=OPTIONS)

    def default_voice(self) -> str | None:
        if PREFERRED_DEFAULT_VOICE in self._builtin:
            return PREFERRED_DEFAULT_VOICE
        return next(iter(sorted(self._builtin)), None)

    def voices(self) -> list[Voice]:
        builtin = [Voice(id=v, engine=ENGINE_ID, source="builtin") for v in sorted(self._builtin)]
        cloned = [Voice(id=v, engine=ENGINE_ID, source="cloned") for v in sorted(self._cloned)]
        return builtin + cloned

    def _voice_ids(self) -> list[str]:
        return [v.id for v in self.voices()]

    # ---- synthesis
    def _ready_scheduler(self) -> BatchScheduler:
        if self._status.state != EngineState.READY or self._scheduler is None:
            raise EngineUnavailable.not_ready(ENGINE_ID, "Pocket TTS", self._status)
        return self._scheduler

    def open_stream(self, text: str, voice: str | None = None,
                    options: SynthesisOptions | None = None) -> ScheduledStream:
        """Start synthesising ``text``; must be called on the event loop that reads the frames."""
        check_options(self.info(), options)
        scheduler = self._ready_scheduler()
        if not isinstance(text, str) or not text.strip():
            raise EngineError("text: nothing to say (empty or whitespace only)", code="bad_request")
        voice_id = voice or self.default_voice()
        state = self._builtin.get(voice_id) if voice_id else None
        if state is None and voice_id:
            state = self._cloned.get(voice_id)
        if state is None:
            raise UnknownVoice(str(voice_id), self._voice_ids())
        options = options or SynthesisOptions()
        settings = self._model.defaults
        if options.temperature is not None:
            if not 0 <= options.temperature <= MAX_TEMPERATURE:
                raise EngineError(f"temperature: must be between 0 and {MAX_TEMPERATURE:g}, "
                                  f"got {options.temperature:g}", code="bad_request")
            settings = dataclasses.replace(settings, temperature=float(options.temperature))
        return scheduler.submit(text, state, settings, options.seed)

    # ---- voices
    async def clone_voice(self, voice_id: str, wav_bytes: bytes, transcript: str | None = None) -> Voice:
        """Make voice ``voice_id`` from a WAV sample and keep it in ``voices_dir``.
        Pocket clones from the audio alone, so a ``transcript`` is refused rather
        than dropped."""
        scheduler = self._ready_scheduler()
        if transcript is not None:
            raise EngineError(TRANSCRIPT_REFUSED, code="bad_request")
        if not _VOICE_ID.match(voice_id or ""):
            raise EngineError(f"voice_id: {voice_id!r} is not allowed (1-64 letters, digits, '_', '-', '.', "
                              "starting with a letter or digit)", code="bad_request")
        if voice_id in self._builtin:
            raise EngineError(f"voice_id: {voice_id!r} is a built-in voice; choose another name",
                              code="bad_request")
        if not self._model.can_clone:
            raise CloneRefused("this Pocket TTS checkpoint has no voice-cloning weights (its Mimi encoder is "
                               "all zeros); use one of the built-in voices: " + ", ".join(sorted(self._builtin)))
        from engines.pocket.cloning import read_wav

        try:
            audio, rate = read_wav(wav_bytes)
        except ValueError as exc:
            raise EngineError(str(exc), code="bad_audio") from None
        model = self._model

        def clone():
            return model.clone_voice(audio, rate)

        try:
            state = await asyncio.wrap_future(scheduler.run_exclusive(clone))
        except ValueError as exc:
            raise EngineError(str(exc), code="bad_audio") from None
        await asyncio.to_thread(self._save_voice, voice_id, state)
        self._cloned[voice_id] = state
        return Voice(id=voice_id, engine=ENGINE_ID, source="cloned")

    def _save_voice(self, voice_id: str, state) -> None:
        from engines.pocket.voice import save_voice_file

        write_atomically(self.voices_dir / f"{voice_id}.safetensors", lambda tmp: save_voice_file(state, tmp))

    async def delete_voice(self, voice_id: str) -> None:
        if voice_id in self._builtin:
            raise EngineError(f"voice {voice_id!r} is built into the model and cannot be deleted",
                              code="bad_request")
        if voice_id not in self._cloned:
            raise UnknownVoice(voice_id, self._voice_ids())
        del self._cloned[voice_id]
        await asyncio.to_thread((self.voices_dir / f"{voice_id}.safetensors").unlink, missing_ok=True)
