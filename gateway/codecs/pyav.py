"""The one place that imports PyAV (FFmpeg), on first use: PCM and G.711 paths
never load it, and a missing install says how to get it."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from gateway.audio import AudioFormatError
from gateway.errors import GatewayError

INSTALL_HINT = "compressed audio needs PyAV (FFmpeg), which is not installed: pip install 'av>=14'"


class CodecUnavailable(GatewayError):
    """PyAV (or one of its codecs) is missing; the message says how to install it."""

    code = "codec_unavailable"


@functools.lru_cache(maxsize=1)
def load_av() -> ModuleType:
    try:
        import av
    except ImportError as exc:
        raise CodecUnavailable(INSTALL_HINT) from exc
    return av


def codec_context(name: str, mode: str) -> object:
    """A fresh codec context (``mode`` "r" decodes, "w" encodes)."""
    av = load_av()
    try:
        return av.CodecContext.create(name, mode)
    except Exception as exc:  # PyAV raises its own UnknownCodecError / ValueError
        raise CodecUnavailable(f"this FFmpeg build has no {name} {'decoder' if mode == 'r' else 'encoder'}: {exc}") \
            from exc


def ffmpeg_error(exc: Exception, what: str) -> AudioFormatError:
    """An FFmpeg failure on client data, as a message a client can act on."""
    detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return AudioFormatError(f"{what}: {detail}")


MAX_CHANNELS = 8


def frame_to_mono(frame: Any) -> np.ndarray:
    """A decoded ``av.AudioFrame`` (any sample format, planar or packed) as mono
    float32 in [-1, 1], channels averaged."""
    channels = len(frame.layout.channels)
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioFormatError(f"audio with {channels} channels; at most {MAX_CHANNELS} are accepted")
    data = frame.to_ndarray()
    if not frame.format.is_planar:
        data = data.reshape(-1, channels).T
    if data.dtype == np.uint8:
        data = (data.astype(np.float32) - 128.0) / 128.0
    elif data.dtype.kind == "i":
        data = data.astype(np.float32) / float(1 << (8 * data.dtype.itemsize - 1))
    else:
        data = data.astype(np.float32)
    mono = data[0] if channels == 1 else data.mean(axis=0)
    return np.ascontiguousarray(mono, dtype=np.float32)
