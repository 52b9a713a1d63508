"""The audio formats the gateway speaks, as data: what comes in on a dictation
socket, what goes out of a TTS route, at which rates, under which media type.

Nothing here imports a codec library; parsing a query string or a request body
costs nothing, whichever format it names.
"""

from __future__ import annotations

import enum

from gateway.audio import MAX_RATE, MIN_RATE, AudioFormatError

# Rates each codec can encode natively (inside the gateway's 8..48 kHz).
MPEG_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)  # MP3 and AAC
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
OPUS_DECODE_RATE = 48000  # Opus always decodes at 48 kHz here, whatever the encoder's rate was
G711_RATE = 8000


class InputEncoding(str, enum.Enum):
    """``encoding`` of a /v1/dictation socket."""

    PCM_S16LE = "pcm_s16le"
    PCM_F32LE = "pcm_f32le"
    MULAW = "mulaw"
    ALAW = "alaw"
    OPUS = "opus"  # raw Opus packets, one per binary message
    WEBM = "webm"  # a WebM/Matroska byte stream with an Opus track (MediaRecorder)
    OGG = "ogg"  # an Ogg Opus byte stream

    @property
    def is_container(self) -> bool:
        """A byte stream whose messages are arbitrary cuts: one bad byte spoils the rest."""
        return self in (InputEncoding.WEBM, InputEncoding.OGG)

    @property
    def default_rate(self) -> int:
        return G711_RATE if self in (InputEncoding.MULAW, InputEncoding.ALAW) else 16000

    def check_rate(self, rate: int) -> None:
        """Raises ``ValueError`` for a rate this encoding cannot carry."""
        if self is InputEncoding.OPUS and rate not in OPUS_RATES:
            raise ValueError(f"must be one of {', '.join(map(str, OPUS_RATES))} for Opus")
        if self.is_container:  # the stream's own header names its rate: a second one could only disagree
            raise ValueError(f"is not taken with encoding={self.value}: the stream carries its own rate; "
                             "leave sample_rate out")


class OutputFormat(str, enum.Enum):
    """Audio produced by the TTS routes."""

    PCM_S16LE = "pcm_s16le"
    PCM_F32LE = "pcm_f32le"
    WAV = "wav"
    MULAW = "mulaw"
    ALAW = "alaw"
    MP3 = "mp3"
    OPUS = "opus"  # Ogg Opus
    AAC = "aac"  # ADTS
    FLAC = "flac"

    @property
    def media_type(self) -> str:
        return _MEDIA_TYPES[self]

    @property
    def needs_av(self) -> bool:
        """Encoded by FFmpeg (PyAV); the others are plain numpy."""
        return self in (OutputFormat.MP3, OutputFormat.OPUS, OutputFormat.AAC, OutputFormat.FLAC)

    @property
    def rates(self) -> tuple[int, ...] | None:
        """The rates the codec accepts; None: any rate of the gateway's range."""
        if self in (OutputFormat.MP3, OutputFormat.AAC):
            return MPEG_RATES
        if self is OutputFormat.OPUS:
            return OPUS_RATES
        return None

    def default_rate(self, native_rate: int) -> int:
        """The rate used when the request names none: G.711 is telephony's 8 kHz;
        everything else keeps the engine's rate if the codec can carry it."""
        if self in (OutputFormat.MULAW, OutputFormat.ALAW):
            return G711_RATE
        rates = self.rates
        if rates is None or native_rate in rates:
            return native_rate
        return min(rates, key=lambda r: (abs(r - native_rate), -r))

    def check_rate(self, rate: int) -> None:
        """Raises ``ValueError`` for a rate this codec cannot encode."""
        rates = self.rates
        if rates is not None and rate not in rates:
            raise ValueError(f"must be one of {', '.join(map(str, rates))} for {self.value}")


_MEDIA_TYPES = {
    OutputFormat.PCM_S16LE: "audio/pcm",
    OutputFormat.PCM_F32LE: "audio/pcm",
    OutputFormat.WAV: "audio/wav",
    OutputFormat.MULAW: "audio/basic",
    OutputFormat.ALAW: "audio/x-alaw-basic",
    OutputFormat.MP3: "audio/mpeg",
    OutputFormat.OPUS: "audio/ogg; codecs=opus",
    OutputFormat.AAC: "audio/aac",
    OutputFormat.FLAC: "audio/flac",
}

# What each route offers, in the order error messages list them.
SOCKET_OUTPUTS = (OutputFormat.PCM_S16LE, OutputFormat.PCM_F32LE, OutputFormat.OPUS, OutputFormat.MULAW,
                  OutputFormat.ALAW)
HTTP_OUTPUTS = (OutputFormat.WAV, OutputFormat.PCM_S16LE, OutputFormat.PCM_F32LE, OutputFormat.MP3,
                OutputFormat.OPUS, OutputFormat.AAC, OutputFormat.FLAC, OutputFormat.MULAW, OutputFormat.ALAW)
# OpenAI's ``response_format`` names (its ``pcm`` is 16-bit little-endian).
OPENAI_OUTPUTS = {"mp3": OutputFormat.MP3, "opus": OutputFormat.OPUS, "aac": OutputFormat.AAC,
                  "flac": OutputFormat.FLAC, "wav": OutputFormat.WAV, "pcm": OutputFormat.PCM_S16LE}


def parse_input_encoding(raw: str) -> InputEncoding:
    try:
        return InputEncoding(raw)
    except ValueError:
        raise ValueError(f"must be one of: {', '.join(e.value for e in InputEncoding)}") from None


def parse_output_format(raw: str, offered: tuple[OutputFormat, ...]) -> OutputFormat:
    for fmt in offered:
        if fmt.value == raw:
            return fmt
    raise ValueError(f"must be one of: {', '.join(f.value for f in offered)}")


def check_source_rate(rate: int, what: str = "the audio") -> None:
    """A decoded stream's own rate, which comes from its header: refuse what the
    gateway would not accept as a parameter either."""
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioFormatError(f"{what} has a sample rate of {rate} Hz; accepted: {MIN_RATE} to {MAX_RATE} Hz")
