"""The interfaces the gateway may call on a speech engine: ``TtsEngine`` (and
its per-utterance ``TtsStream``) and ``AsrService`` (and its ``AsrStreamHandle``).

A TTS engine is loaded once and shared by every session. It opens a *stream*
per utterance; the stream yields PCM frames as soon as they exist and can be
cancelled between frames. Engines that run many streams at once must not need a
model copy per stream (Pocket batches them; OmniVoice serialises them).

Concurrency contract: ``TtsEngine`` methods are called from the event loop and
must not block it for more than a few milliseconds; model compute runs on the
engine's own worker thread(s). ``TtsStream.frames()`` is an async iterator that
is consumed by exactly one task.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np


class EngineState(str, enum.Enum):
    """Lifecycle of an engine as reported by ``/v1/engines`` and ``/health``."""

    LOADING = "loading"
    READY = "ready"
    MISSING = "missing"  # weights or an optional package are not on this machine
    FAILED = "failed"  # present but could not be loaded


@dataclass(frozen=True)
class EngineStatus:
    state: EngineState
    detail: str = ""  # what is missing / what failed
    hint: str = ""  # how to fix it (a command, a package)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state.value}
        if self.detail:
            out["detail"] = self.detail
        if self.hint:
            out["hint"] = self.hint
        return out


class LoadsInThread(ABC):
    """The lifecycle every engine here shares: ``status()``; ``load()``, which runs
    the engine's blocking ``_load_blocking`` in a thread and never raises, so the
    gateway keeps running without the engine (a failure becomes the ``failed``
    status); and ``_mark_closed()``, the ``missing`` status a closed engine reports.
    ``display_name`` is the engine's name in those statuses and in the log."""

    display_name: ClassVar[str]
    _status: EngineStatus

    def status(self) -> EngineStatus:
        return self._status

    async def load(self) -> None:
        """Load in a thread. Never raises: the outcome is in ``status()``."""
        try:
            await asyncio.to_thread(self._load_blocking)
        except Exception as exc:
            self._failed_to_load(exc)

    def _failed_to_load(self, exc: Exception) -> None:
        logging.getLogger(type(self).__module__).error("%s failed to load", self.display_name, exc_info=exc)
        self._status = EngineStatus(EngineState.FAILED, detail=f"{self.display_name} failed to load: {exc}")

    @abstractmethod
    def _load_blocking(self) -> None:
        ...

    def _mark_closed(self) -> None:
        if self._status.state is EngineState.READY:
            self._status = EngineStatus(EngineState.MISSING, detail=f"{self.display_name} engine closed")


@dataclass(frozen=True)
class TtsInfo:
    id: str  # "pocket", "omnivoice"
    sample_rate: int  # native output rate
    frame_samples: int  # native frame size (Pocket: 1920 = 80 ms at 24 kHz)
    languages: tuple[str, ...] = ("en",)
    can_clone: bool = False
    default_voice: str | None = None
    # the per-utterance options (engines.options.OPTION_NAMES) this engine honours; any other is refused
    options: tuple[str, ...] = ()
    # its cloning takes what the clip says (OmniVoice); one that clones from the audio alone refuses a transcript
    clone_uses_transcript: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sample_rate": self.sample_rate,
            "frame_samples": self.frame_samples,
            "languages": list(self.languages),
            "can_clone": self.can_clone,
            "default_voice": self.default_voice,
            "options": list(self.options),
            "clone_uses_transcript": self.clone_uses_transcript,
        }


@dataclass(frozen=True)
class Voice:
    id: str
    engine: str
    name: str = ""
    language: str = "en"
    source: str = "builtin"  # "builtin" (shipped with the model) or "cloned" (added at runtime)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "engine": self.engine, "name": self.name or self.id,
                "language": self.language, "source": self.source}


@dataclass(frozen=True)
class SynthesisOptions:
    temperature: float | None = None  # None: the engine's default
    seed: int | None = None  # None: a fresh random seed per utterance
    extra: dict[str, Any] = field(default_factory=dict)


class EngineError(Exception):
    """Raised by an engine; ``code`` is the protocol error code."""

    code = "engine_error"

    def __init__(self, message: str, *, code: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.hint = hint


class EngineUnavailable(EngineError):
    """The engine cannot synthesize now. The message and hint may name server
    paths and commands: they are for the server's log and the local CLI. A
    gateway tells its clients only ``engine`` (the engine's id) and ``state``
    (None when it stopped while ready)."""

    code = "engine_unavailable"

    def __init__(self, message: str, *, engine: str = "", state: EngineState | None = None, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.engine = engine
        self.state = state

    @classmethod
    def not_ready(cls, engine: str, name: str, status: EngineStatus) -> EngineUnavailable:
        """``name`` (e.g. "Pocket TTS") is not ready: its status's detail in the message, its hint kept."""
        detail = f": {status.detail}" if status.detail else ""
        return cls(f"{name} is not available ({status.state.value}{detail})", engine=engine, state=status.state,
                   hint=status.hint)


class UnknownVoice(EngineError):
    code = "unknown_voice"

    def __init__(self, voice: str, available: list[str]) -> None:
        super().__init__(
            f"unknown voice {voice!r}; available voices: {', '.join(available) or '(none)'}"
        )
        self.voice = voice
        self.available = available


class CloneRefused(EngineError):
    code = "clone_unsupported"


@runtime_checkable
class TtsStream(Protocol):
    """One utterance being synthesised."""

    def frames(self) -> AsyncIterator[np.ndarray]:
        """Yield float32 mono PCM frames at ``info().sample_rate``, in order."""
        ...

    def cancel(self) -> None:
        """Stop at the next frame boundary; ``frames()`` then ends. Idempotent."""
        ...


@runtime_checkable
class TtsEngine(Protocol):
    def info(self) -> TtsInfo: ...

    def status(self) -> EngineStatus: ...

    async def load(self) -> None:
        """Load weights (off the event loop). Never raises: failures go to status()."""
        ...

    async def close(self) -> None: ...

    def voices(self) -> list[Voice]: ...

    def open_stream(self, text: str, voice: str | None = None,
                    options: SynthesisOptions | None = None) -> TtsStream:
        """Start synthesising ``text``. Raises UnknownVoice / EngineUnavailable at once."""
        ...

    async def clone_voice(self, voice_id: str, wav_bytes: bytes, transcript: str | None = None) -> Voice:
        """Make a new voice from a short WAV and keep it. Raises CloneRefused if unsupported.

        ``transcript`` is what the clip says, for engines whose prompts use it
        (``TtsInfo.clone_uses_transcript``); one that clones from the audio alone
        refuses it (``EngineError``, ``bad_request``)."""
        ...

    async def delete_voice(self, voice_id: str) -> None: ...


@runtime_checkable
class AsrStreamHandle(Protocol):
    """One live dictation stream on an ``AsrService``.

    ``events`` is a bounded queue of protocol events for the client (the
    gateway's frozen event dataclasses, errors included); ``overflowed`` turns
    true when an essential event (a final) could not be queued because the
    client reads nothing.
    """

    events: asyncio.Queue[Any]
    overflowed: bool
    lag_s: float
    finals: int

    @property
    def audio_s(self) -> float: ...

    async def send_audio(self, samples: np.ndarray) -> None:
        """Mono float32 audio at 16 kHz, in order."""
        ...

    async def finalize(self, mark: str | None = None) -> None:
        """End the open utterance now; its final follows. A ``mark`` is answered
        by a ``finalized`` event once every final of the audio before it is out."""
        ...

    async def configure(self, prompt: str | None, reset_context: bool = False,
                        terms: tuple[str, ...] = ()) -> None:
        """Condition every decode from now on on ``prompt`` (the stream's vocabulary; "" for none,
        None to keep it and its terms); ``reset_context``: also forget the stream's earlier finals
        as context; ``terms``: with a new prompt, the spellings its finals are written with."""
        ...

    async def end(self) -> None:
        """No more audio: the last finals, then a closed event."""
        ...

    async def close(self) -> None:
        """Drop the stream (the client left)."""
        ...


@runtime_checkable
class AsrService(Protocol):
    """The speech recognizer the gateway depends on: the ASR sidecar's
    supervisor implements it, tests use a fake. Called from the event loop."""

    model_name: str
    restarts: int  # how often the recognizer was restarted since start-up

    def status(self) -> EngineStatus: ...

    def info(self) -> dict[str, Any]:
        """``model``, ``languages`` (empty: any), ``multilingual`` and counters."""
        ...

    async def start(self) -> None:
        """Start and wait until ready or failed. Never raises: failures go to status()."""
        ...

    async def aclose(self) -> None: ...

    async def wait_ready(self, timeout_s: float) -> bool:
        """True once ready; False when the first start failed or ``timeout_s`` passed."""
        ...

    async def open_stream(self, options: dict[str, Any]) -> AsrStreamHandle:
        """A new stream; ``options``: language (None: detect), interim, word_timestamps, silence_ms,
        eager, prompt (decoder context: the stream's vocabulary)."""
        ...

    async def transcribe(self, samples: np.ndarray, *, language: str | None, word_timestamps: bool,
                         timeout_s: float, prompt: str = "", terms: tuple[str, ...] = ()) -> dict[str, Any]:
        """A whole file (16 kHz float32): ``text``, ``language``, ``duration``, ``segments``, ``words``;
        every window decoded with ``prompt`` as context, and written with ``terms``' spellings."""
        ...
