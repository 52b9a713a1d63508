"""ElevenLabs' request parameters mapped onto the gateway's TTS: the
``output_format`` names, the socket query (``model_id``, ``inactivity_timeout``,
``sync_alignment``, ``auto_mode``, ...) and the voice in the path.

What every other field does here (honoured, refused by name, or accepted with a
documented meaning) is decided in gateway/fronts/elevenlabs/fields.py.

``inactivity_timeout`` (1 to 180 s, as ElevenLabs takes it) is held to the
gateway's own idle timeout (``VOXGATE_IDLE_TIMEOUT_S``), the ceiling of every
vendor timeout: a larger value is applied as that ceiling (``capped``), not
refused, because LiveKit's ElevenLabs plugin sends 180 on every socket.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from engines.base import TtsEngine
from gateway.codecs.formats import MPEG_RATES, OutputFormat
from gateway.errors import BadRequest
from gateway.fronts.elevenlabs.fields import check_socket_query
from gateway.tts.selection import voice_ids

DEFAULT_FORMAT = "mp3_44100_128"  # ElevenLabs' default, on its sockets and its HTTP routes
PCM_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
DEFAULT_INACTIVITY_S = 20
MAX_INACTIVITY_S = 180
MP3_BYTES_PER_S = 8000  # the codec layer's MP3 is 64 kbit/s at these rates (alignment timing of MP3 messages)
_MP3 = re.compile(r"^mp3_(\d+)_(\d+)$")


@dataclass(frozen=True)
class AudioFormat:
    name: str  # ElevenLabs' name, e.g. pcm_16000
    format: OutputFormat
    sample_rate: int

    def duration_ms(self, data: bytes) -> float:
        """How much audio a message of ``data`` carries (MP3: estimated from its bit rate)."""
        if self.format is OutputFormat.PCM_S16LE:
            return len(data) / 2 / self.sample_rate * 1000
        if self.format in (OutputFormat.MULAW, OutputFormat.ALAW):
            return len(data) / self.sample_rate * 1000
        return len(data) / MP3_BYTES_PER_S * 1000


def parse_output_format(raw: str | None) -> AudioFormat:
    """``pcm_<rate>``, ``ulaw_8000``, ``alaw_8000``, ``mp3_<rate>_<kbps>``;
    ``BadRequest`` naming the ones offered."""
    name = (raw or DEFAULT_FORMAT).strip().lower()
    if name.startswith("pcm_") and name[4:].isdigit() and int(name[4:]) in PCM_RATES:
        return AudioFormat(name, OutputFormat.PCM_S16LE, int(name[4:]))
    if name == "ulaw_8000":
        return AudioFormat(name, OutputFormat.MULAW, 8000)
    if name == "alaw_8000":
        return AudioFormat(name, OutputFormat.ALAW, 8000)
    match = _MP3.match(name)
    if match and int(match.group(1)) in MPEG_RATES:
        return AudioFormat(name, OutputFormat.MP3, int(match.group(1)))
    offered = ", ".join([f"pcm_{r}" for r in PCM_RATES] + ["ulaw_8000", "alaw_8000", "mp3_22050_32",
                                                         "mp3_44100_<kbps>"])
    raise BadRequest(f"output_format: {name[:30]!r} is not supported; use one of: {offered}")


@dataclass(frozen=True)
class SocketParams:
    model_id: str
    audio: AudioFormat
    inactivity_timeout_s: float  # the one in force: the client's, or the gateway's ceiling (``capped``)
    requested_inactivity_s: int = DEFAULT_INACTIVITY_S  # what the client asked for
    language_code: str | None = None
    engine_options: Mapping[str, str] = field(default_factory=dict)  # SynthesisOptions.extra of every context

    @property
    def inactivity_capped(self) -> bool:
        return self.inactivity_timeout_s < self.requested_inactivity_s

    def capped(self, ceiling_s: float) -> SocketParams:
        """These parameters with ``inactivity_timeout`` at most ``ceiling_s``."""
        return replace(self, inactivity_timeout_s=min(float(self.requested_inactivity_s), ceiling_s))

    def idle_reason(self) -> str:
        """The close reason of a socket (and the idle close of a context) after ``inactivity_timeout``."""
        if self.inactivity_capped:
            return (f"no text received for {self.inactivity_timeout_s:g} s (inactivity_timeout "
                    f"{self.requested_inactivity_s} is capped at the server's idle timeout)")
        return f"no text received for {self.inactivity_timeout_s:g} s (inactivity_timeout)"


def parse_socket_params(query: Mapping[str, str]) -> SocketParams:
    """The query of ``stream-input`` and ``multi-stream-input``; ``BadRequest`` naming the parameter."""
    raw = query.get("inactivity_timeout")
    timeout = DEFAULT_INACTIVITY_S
    if raw:
        try:
            timeout = int(raw)
        except ValueError:
            raise BadRequest(f"inactivity_timeout: {raw[:20]!r} is not an integer") from None
        if not 1 <= timeout <= MAX_INACTIVITY_S:
            raise BadRequest(f"inactivity_timeout: {timeout} must be between 1 and {MAX_INACTIVITY_S} seconds")
    check_socket_query(query)
    return SocketParams(model_id=(query.get("model_id") or "")[:128], audio=parse_output_format(
        query.get("output_format")), inactivity_timeout_s=float(timeout), requested_inactivity_s=timeout,
        language_code=query.get("language_code") or None)


def voice_for(engine: TtsEngine, voice_id: str) -> str | None:
    """ElevenLabs names voices by their id (``21m00Tcm4TlvDq8ikWAM``): a voice of that
    id here is used, any other id gets the engine's default voice."""
    return voice_id if voice_id in voice_ids(engine) else engine.info().default_voice
