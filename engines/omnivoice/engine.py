"""The OmniVoice engine the gateway talks to (``engines.base.TtsEngine``).

Loading runs in a thread at start-up and never raises: ``status()`` says
loading, ready, missing (the package, the weights or the device, with a hint)
or failed. After that one worker thread owns the model (engines/omnivoice/worker.py):
sentences, voice prompts, idle unloads and reloads run there one at a time.

Capacity: at most ``max_streams`` utterances are open at once (each has at most
one sentence queued or generating); one more is refused with
``EngineError(code="over_capacity")``, which clients may retry.

Idle unload: with ``idle_unload_s`` > 0 the model is dropped after that long
without a job (freeing GPU memory) and reloaded by the next job; the state stays
``ready`` and ``detail`` says the model is unloaded.

Concurrency contract: every public method is called from the event loop and
returns quickly; model work runs on the worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from engines.base import (
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
from engines.missing import ModelMissing
from engines.omnivoice.backend import Backend, LoadSpec, PackageChecks, load_backend, package_checks
from engines.omnivoice.options import instruct_option, language_option
from engines.omnivoice.prompts import PromptCache
from engines.omnivoice.runtime import PACKAGE_HINT, RuntimeMissing
from engines.omnivoice.stream import SentenceStream
from engines.omnivoice.synthesis import Plan, PromptSource, make_prompt, read_clip
from engines.omnivoice.voices import DEFAULT_VOICE, DESIGNED, VOICE_ID, ClonedVoice, DesignedVoice, VoiceStore
from engines.options import check_options

log = logging.getLogger(__name__)

ENGINE_ID = "omnivoice"
SAMPLE_RATE = 24000
FRAME_S = 0.08
OPTIONS = ("seed", "language", "instruct")
CLONE_SLOTS = 2  # voice uploads queued beside the streams
TRANSCRIPT_HINT = ("send the clip's transcript as the form field ref_text, or set VOXGATE_OMNIVOICE_ASR_MODEL "
                   "to a local Whisper model directory (transformers format)")


class OmniVoiceEngine(LoadsInThread):
    """OmniVoice behind the ``TtsEngine`` interface (see the module docstring)."""

    display_name = "OmniVoice"

    def __init__(self, spec: LoadSpec, voices_dir: Path, cache_dir: Path, *, idle_unload_s: float = 0.0,
                 max_streams: int = 8, split_sentences: Callable[[str], list[str]] | None = None,
                 generate_timeout_s: float = 300.0, prompt_items: int = 64, prompt_files: int = 256,
                 loader: Callable[[LoadSpec], Backend] = load_backend,
                 checks: Callable[[], PackageChecks] = package_checks) -> None:
        self.spec, self.idle_unload_s, self.max_streams = spec, idle_unload_s, max_streams
        self.generate_timeout_s = generate_timeout_s
        self._split = split_sentences or (lambda text: [text])
        self._loader, self._checks_loader = loader, checks
        self.store = VoiceStore(voices_dir)
        self.prompts = PromptSource(PromptCache(cache_dir, prompt_items, prompt_files), self.store)
        self._status = EngineStatus(EngineState.LOADING)
        self._lock = threading.Lock()  # backend and status change on the worker thread
        self._backend: Backend | None = None
        self._checks: PackageChecks | None = None
        self._worker: Any = None
        self._sample_rate = SAMPLE_RATE
        self._can_transcribe = False
        self._fingerprint = ""
        self._active = 0
        self.loads = 0

    # ---- lifecycle
    def _load_blocking(self) -> None:
        from engines.omnivoice.worker import GenerationWorker

        try:
            self._checks = self._checks_loader()
        except RuntimeMissing as exc:
            self._status = EngineStatus(EngineState.MISSING, detail=f"OmniVoice is not installed: {exc}",
                                        hint=PACKAGE_HINT)
            return
        self.store.load()
        if self._open_backend() is None:
            return
        self._worker = GenerationWorker(max_jobs=self.max_streams + CLONE_SLOTS, idle_s=self.idle_unload_s,
                                        on_idle=self._unload_idle)
        self._worker.start()

    def _open_backend(self) -> Backend | None:
        """Load the model (start-up, or a reload after an idle unload); the outcome goes to ``status()``."""
        try:
            backend = self._loader(self.spec)
        except RuntimeMissing as exc:
            hint = PACKAGE_HINT if "not installed" in str(exc) else "set VOXGATE_DEVICE=auto (or cpu)"
            self._status = EngineStatus(EngineState.MISSING, detail=f"OmniVoice cannot run here: {exc}", hint=hint)
            return None
        except ModelMissing as exc:
            self._status = EngineStatus(EngineState.MISSING, detail=str(exc), hint=exc.hint)
            return None
        except Exception as exc:
            self._failed_to_load(exc)
            return None
        with self._lock:
            self._backend = backend
            self._sample_rate, self._can_transcribe = backend.sample_rate, backend.can_transcribe
            self._fingerprint = backend.fingerprint
            self._status = EngineStatus(EngineState.READY)
            self.loads += 1
        return backend

    def _loaded_backend(self) -> Backend:
        """The model, reloaded if an idle unload dropped it (worker thread)."""
        backend = self._backend
        if backend is not None:
            return backend
        self._status = EngineStatus(EngineState.READY, detail="reloading the model after an idle unload")
        backend = self._open_backend()
        if backend is None:
            raise EngineUnavailable(f"OmniVoice could not reload: {self._status.detail}", engine=ENGINE_ID,
                                    state=self._status.state, hint=self._status.hint)
        return backend

    def _unload_idle(self) -> bool:
        """Drop the model unless an utterance is open; True when there is nothing left to unload."""
        with self._lock:
            if self._active:
                return False
            backend, self._backend = self._backend, None
            if backend is None:
                return True
            self._status = EngineStatus(
                EngineState.READY, detail=f"model unloaded after {self.idle_unload_s:g} s idle; the next request "
                                          "reloads it (a few seconds)")
        backend.close()
        log.info("OmniVoice unloaded after %g s idle", self.idle_unload_s)
        return True

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await asyncio.to_thread(worker.close)
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()
        self._mark_closed()

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    @property
    def active_streams(self) -> int:
        return self._active

    # ---- description
    def info(self) -> TtsInfo:
        languages = tuple(sorted(self._checks.language_ids)) if self._checks is not None else ()
        return TtsInfo(id=ENGINE_ID, sample_rate=self._sample_rate,
                       frame_samples=round(self._sample_rate * FRAME_S), languages=languages,
                       can_clone=self._status.state is EngineState.READY, default_voice=DEFAULT_VOICE,
                       options=OPTIONS, clone_uses_transcript=True)

    def voices(self) -> list[Voice]:
        designed = [Voice(id=v.id, engine=ENGINE_ID, language=v.language, source="builtin") for v in DESIGNED.values()]
        cloned = [Voice(id=v, engine=ENGINE_ID, language="", source="cloned") for v in self.store.ids()]
        return designed + cloned

    def _voice_ids(self) -> list[str]:
        return [v.id for v in self.voices()]

    # ---- synthesis
    def _ready(self) -> None:
        if self._status.state is not EngineState.READY or self._worker is None:
            raise EngineUnavailable.not_ready(ENGINE_ID, "OmniVoice", self._status)

    def _submit(self, job: Callable[[], Any]) -> Future[Any]:
        try:
            future: Future[Any] = self._worker.submit(job)
        except queue.Full:
            raise EngineError("OmniVoice's queue is full; try again shortly", code="over_capacity") from None
        except RuntimeError as exc:  # closed while the request came in
            raise EngineUnavailable(f"OmniVoice is not available ({exc})", engine=ENGINE_ID) from None
        return future

    def open_stream(self, text: str, voice: str | None = None,
                    options: SynthesisOptions | None = None) -> SentenceStream:
        """Start speaking ``text``. Raises at once for a bad voice, option or a full queue."""
        self._ready()
        if not isinstance(text, str) or not text.strip():
            raise EngineError("text: nothing to say (empty or whitespace only)", code="bad_request")
        check_options(self.info(), options)
        options = options or SynthesisOptions()
        instruct = instruct_option(self._checks, options.extra.get("instruct"))
        language = language_option(self._checks, options.extra.get("language"))
        chosen: DesignedVoice | ClonedVoice | None = DESIGNED[DEFAULT_VOICE]
        if voice is not None:
            chosen = DESIGNED.get(voice) or self.store.get(voice)
            if chosen is None:
                raise UnknownVoice(voice, self._voice_ids())
        if instruct and isinstance(chosen, DesignedVoice):
            # a built-in voice is only a stored description (and the gateway names the default one
            # when a request names no voice): the request's own description replaces it
            chosen = None
        if self._active >= self.max_streams:
            raise EngineError(f"OmniVoice is busy: {self._active} utterances are waiting or generating (the limit "
                              f"is {self.max_streams}); try again shortly", code="over_capacity")
        sentences = [s for s in self._split(text.strip()) if s.strip()] or [text.strip()]
        plan = Plan(sentences, chosen, instruct, language, options.seed, self._loaded_backend, self.prompts)
        self._active += 1
        return SentenceStream(sentences, plan.run, self._submit, round(self._sample_rate * FRAME_S),
                              self.generate_timeout_s, self._release, text=text)

    def _release(self) -> None:
        self._active = max(0, self._active - 1)

    # ---- voices
    async def clone_voice(self, voice_id: str, wav_bytes: bytes, transcript: str | None = None) -> Voice:
        """Make voice ``voice_id`` from a clip (and its transcript) and keep it."""
        self._ready()
        if not VOICE_ID.match(voice_id or ""):
            raise EngineError(f"id: {voice_id!r} is not allowed (1-64 letters, digits, '_' or '-', starting with a "
                              "letter or digit)", code="bad_request")
        if voice_id in DESIGNED or self.store.get(voice_id) is not None:
            raise EngineError(f"id: voice {voice_id!r} already exists", code="bad_request")
        transcript = transcript.strip() if transcript and transcript.strip() else None
        if transcript is None and not self._can_transcribe:
            raise EngineError("ref_text: required for OmniVoice voices on this server: no Whisper model is on this "
                              "machine to transcribe the clip", code="bad_request", hint=TRANSCRIPT_HINT)
        audio, rate = await asyncio.to_thread(read_clip, wav_bytes)

        def build() -> tuple[Any, str]:
            backend = self._loaded_backend()
            prompt = make_prompt(backend, audio, rate, transcript)
            return prompt, backend.fingerprint

        future = self._submit(build)
        try:
            prompt, fingerprint = await asyncio.wait_for(asyncio.wrap_future(future), self.generate_timeout_s)
        except asyncio.TimeoutError:
            raise EngineError(f"OmniVoice did not make the voice in {self.generate_timeout_s:g} s",
                              code="engine_timeout") from None
        except EngineError:
            raise
        except Exception as exc:
            log.exception("OmniVoice failed to make voice %s", voice_id)
            raise EngineError(f"OmniVoice failed to make the voice: {exc}", code="engine_error") from None
        stored = await asyncio.to_thread(self.store.add, voice_id, wav_bytes, prompt.ref_text)
        await asyncio.to_thread(self.prompts.cache.put, self.prompts.key_for(stored, fingerprint), prompt)
        return Voice(id=voice_id, engine=ENGINE_ID, language="", source="cloned")

    async def delete_voice(self, voice_id: str) -> None:
        if voice_id in DESIGNED:
            raise EngineError(f"voice {voice_id!r} is built in and cannot be deleted", code="bad_request")
        voice = self.store.get(voice_id)
        if voice is None:
            raise UnknownVoice(voice_id, self._voice_ids())
        await asyncio.to_thread(self.store.remove, voice_id)
        if self._fingerprint:
            await asyncio.to_thread(self.prompts.cache.discard, self.prompts.key_for(voice, self._fingerprint))
